package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/herdbridge/herdbridge/mcp"
)

// codexConfig is the part of a config.toml the Codex tests read back.
type codexConfig struct {
	Model      string                    `toml:"model"`
	MCPServers map[string]codexServer    `toml:"mcp_servers"`
	Profiles   map[string]map[string]any `toml:"profiles"`
}

// codexServer is [mcp_servers.NAME] as the tests read it back.
type codexServer struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
	EnvVars []string          `toml:"env_vars"`
	Tools   map[string]struct {
		ApprovalMode string `toml:"approval_mode"`
	} `toml:"tools"`
}

func readCodexConfig(t *testing.T, path string) (codexConfig, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c codexConfig
	if err := toml.Unmarshal(b, &c); err != nil {
		t.Fatalf("not TOML: %v\n%s", err, b)
	}
	return c, string(b)
}

// TestSetupCodexApprovesAndPassesIdentity: setup codex approves every
// bridge tool by name (approval_mode = "approve", which codex exec needs:
// its approval policy is never) and names the identity variables Codex
// must pass to the server (it passes almost none of its environment);
// the user's comments, keys and other tables stay; a rerun changes
// nothing; --no-allow takes the approvals out again and keeps the rest.
func TestSetupCodexApprovesAndPassesIdentity(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	cfg := filepath.Join(home, "config.toml")
	before := "# my settings\nmodel = \"o3\" # the model\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n\n[mcp_servers.docs.tools.search]\napproval_mode = \"prompt\"\n\n[profiles.fast]\nmodel = \"mini\"\n"
	if err := os.WriteFile(cfg, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errs, err := cli(append([]string{"setup", "codex", "--command", "herdbridge", "--name", "lead"}, args...)...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, errs)
		}
		return out
	}
	run()
	c, after := readCodexConfig(t, cfg)
	if !strings.HasPrefix(after, before) || c.Model != "o3" || c.Profiles["fast"]["model"] != "mini" {
		t.Errorf("the user's file was not kept as it was:\n%s", after)
	}
	if docs := c.MCPServers["docs"]; docs.Tools["search"].ApprovalMode != "prompt" {
		t.Errorf("another server's approvals changed: %+v", docs)
	}
	hb := c.MCPServers["herdbridge"]
	for _, n := range mcp.ToolNames() {
		if hb.Tools[n].ApprovalMode != "approve" {
			t.Errorf("%s is not approved: %+v", n, hb.Tools[n])
		}
	}
	if len(hb.Tools) != len(mcp.ToolNames()) {
		t.Errorf("approvals for tools the server does not have: %v", hb.Tools)
	}
	for _, v := range []string{"HERDBRIDGE_NAME", "HERDBRIDGE_ROLE", "HERDBRIDGE_GROUPS", "HERDBRIDGE_STATE_DIR", "HERDBRIDGE_SPAWN_ID", "HERDR_ENV", "HERDR_PANE_ID", "HERDR_SOCKET_PATH"} {
		if !slices.Contains(hb.EnvVars, v) {
			t.Errorf("env_vars lacks %s: %v", v, hb.EnvVars)
		}
	}
	if out := run(); !strings.Contains(out, "unchanged "+cfg) {
		t.Errorf("a second run changed the config:\n%s", out)
	}

	diff := run("--no-allow", "--print")
	if !strings.Contains(diff, "-approval_mode = 'approve'") || strings.Contains(strings.ReplaceAll(diff, "\n+++ ", ""), "\n+") {
		t.Errorf("--no-allow --print must show the approvals going and nothing coming:\n%s", diff)
	}
	if _, now := readCodexConfig(t, cfg); now != after {
		t.Errorf("--print changed the file")
	}
	run("--no-allow")
	c, final := readCodexConfig(t, cfg)
	if hb := c.MCPServers["herdbridge"]; hb.Tools != nil || len(hb.EnvVars) == 0 || hb.Command != "herdbridge" {
		t.Errorf("--no-allow: %+v", hb)
	}
	if !strings.HasPrefix(final, before) || strings.Contains(final, "tools.bridge_") {
		t.Errorf("--no-allow left:\n%s", final)
	}
}

// TestSetupCodexReplacesOldApprovals: an entry an older setup wrote (with
// its own sub-tables, and approvals for a tool that no longer exists) is
// replaced in place, the tables after it untouched.
func TestSetupCodexReplacesOldApprovals(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CODEX_HOME", home)
	cfg := filepath.Join(home, "config.toml")
	old := "[mcp_servers.herdbridge]\ncommand = \"old\"\n\n[mcp_servers.herdbridge.tools.bridge_gone]\napproval_mode = \"approve\"\n\n[profiles.fast]\nmodel = \"mini\" # keep me\n"
	if err := os.WriteFile(cfg, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, err := cli("setup", "codex", "--command", "herdbridge"); err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	c, after := readCodexConfig(t, cfg)
	hb := c.MCPServers["herdbridge"]
	if _, ok := hb.Tools["bridge_gone"]; ok || hb.Command != "herdbridge" || hb.Tools["bridge_send"].ApprovalMode != "approve" {
		t.Errorf("entry not replaced: %+v", hb)
	}
	if strings.Count(after, "[mcp_servers.herdbridge]") != 1 || !strings.HasSuffix(after, "\n\n[profiles.fast]\nmodel = \"mini\" # keep me\n") {
		t.Errorf("replacing gave:\n%s", after)
	}
}
