package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/clientsetup"
)

// TestSetupClaudeWrites: setup claude writes the allow rule next to
// .mcp.json (settings.local.json: Claude Code did not honour it from the
// shared settings.json) and the server's approval in ~/.claude/settings.json
// (the only settings file it takes that from); --no-allow writes neither;
// --print shows the diff of each file and writes nothing; a server the
// person disabled is reported, not re-enabled.
func TestSetupClaudeWrites(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("HERDR_ENV", "")
	t.Chdir(proj)
	local := filepath.Join(proj, ".claude", "settings.local.json")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte(`{"permissions": {"allow": ["Read"]}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli("setup", "claude", "--print", "--command", "/opt/hb")
	if err != nil {
		t.Fatal(err)
	}
	approval := filepath.Join(home, ".claude", "settings.json")
	for _, w := range []string{"--- /dev/null\n+++ " + filepath.Join(proj, ".mcp.json"), `+      "command": "/opt/hb"`,
		"--- " + local + "\n+++ " + local, `-{"permissions": {"allow": ["Read"]}}` + "\n", `+      "Read",`, `+      "mcp__herdbridge__*"`,
		"--- /dev/null\n+++ " + approval + "\n@@ -0,0 +1,", "+{\n+  \"enabledMcpjsonServers\": [\n+    \"herdbridge\"\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("--print lacks %q:\n%s", w, out)
		}
	}
	if ents, _ := os.ReadDir(proj); len(ents) != 1 {
		t.Errorf("--print wrote %v", ents)
	}
	if _, err := os.Stat(approval); err == nil {
		t.Error("--print wrote ~/.claude/settings.json")
	}

	if _, _, err := cli("setup", "claude", "--no-allow", "--command", "hb"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(local); string(b) != `{"permissions": {"allow": ["Read"]}}`+"\n" {
		t.Errorf("--no-allow changed the settings: %s", b)
	}
	if _, err := os.Stat(approval); err == nil {
		t.Error("--no-allow approved the server")
	}
	if _, _, err := cli("setup", "claude", "--command", "hb"); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Permissions struct{ Allow []string }
		Enabled     []string `json:"enabledMcpjsonServers"`
	}
	b, _ := os.ReadFile(local)
	if json.Unmarshal(b, &s) != nil || !reflect.DeepEqual(s.Permissions.Allow, []string{"Read", "mcp__herdbridge__*"}) || s.Enabled != nil {
		t.Errorf("settings.local.json after setup:\n%s", b)
	}
	b, _ = os.ReadFile(approval)
	s.Permissions.Allow = nil
	if json.Unmarshal(b, &s) != nil || s.Permissions.Allow != nil || !reflect.DeepEqual(s.Enabled, []string{"herdbridge"}) {
		t.Errorf("~/.claude/settings.json after setup:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(proj, ".claude", "settings.json")); err == nil {
		t.Error("setup wrote the shared .claude/settings.json")
	}

	if err := os.WriteFile(local, []byte(`{"disabledMcpjsonServers": ["herdbridge"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, err := cli("setup", "claude", "--command", "hb")
	if err != nil || !strings.Contains(errs, "disabledMcpjsonServers") {
		t.Errorf("a disabled server is not reported (%v): %q", err, errs)
	}

	// user scope: the allow rule joins the approval in ~/.claude/settings.json
	if _, _, err := cli("setup", "claude", "--scope", "user", "--name", "me", "--command", "hb"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(approval)
	s.Permissions.Allow, s.Enabled = nil, nil
	if json.Unmarshal(b, &s) != nil || !reflect.DeepEqual(s.Permissions.Allow, []string{"mcp__herdbridge__*"}) || !reflect.DeepEqual(s.Enabled, []string{"herdbridge"}) {
		t.Errorf("user settings.json:\n%s", b)
	}
}

// TestSetupClaudeName: outside herdr without --name, a project is named
// after its directory (the entry works: no CONNECTION_CLOSED), user scope is
// refused with what to pass; inside a herdr pane the pane names each agent,
// so no default is written.
func TestSetupClaudeName(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(t.TempDir(), "My Repo")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("HERDR_ENV", "")
	t.Chdir(proj)
	entry := func() clientsetup.Entry {
		t.Helper()
		var doc struct{ MCPServers map[string]clientsetup.Entry }
		b, _ := os.ReadFile(".mcp.json")
		_ = json.Unmarshal(b, &doc)
		return doc.MCPServers["herdbridge"]
	}
	_, errs, err := cli("setup", "claude", "--command", "hb")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs, `registers as "My-Repo"`) {
		t.Errorf("the derived name is not said: %q", errs)
	}
	if got := entry().Args; !reflect.DeepEqual(got, []string{"mcp", "--default-role", "primary", "--default-name", "My-Repo"}) {
		t.Errorf("outside herdr: args %q, want the directory's name", got)
	}
	_, _, err = cli("setup", "claude", "--scope", "user", "--command", "hb")
	if err == nil || !strings.Contains(err.Error(), "needs --name NAME") {
		t.Errorf("user scope without --name: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude.json")); err == nil {
		t.Error("a refused setup wrote ~/.claude.json")
	}
	t.Setenv("HERDR_ENV", "1")
	t.Setenv("HERDR_PANE_ID", "p1")
	if _, _, err := cli("setup", "claude", "--command", "hb"); err != nil {
		t.Fatal(err)
	}
	if got := entry().Args; !reflect.DeepEqual(got, []string{"mcp", "--default-role", "primary"}) {
		t.Errorf("inside herdr: args %q, want no default name", got)
	}
}
