package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/herdbridge/herdbridge/clientsetup"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestSetupArgs: a missing or unknown client is a usage error; setup's
// flags come from the environment like every other command's.
func TestSetupArgs(t *testing.T) {
	for _, args := range [][]string{{"setup"}, {"setup", "vim"}, {"setup", "claude", "cursor"}, {"setup", "claude", "--scope", "x"}} {
		_, _, err := cli(args...)
		var u *usageError
		if args[len(args)-1] == "x" {
			if err == nil || !strings.Contains(err.Error(), "project or user") {
				t.Errorf("%q: %v", args, err)
			}
		} else if !errors.As(err, &u) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	if _, _, err := cli("setup", "codex", "--scope", "project"); err == nil || !strings.Contains(err.Error(), "--scope user") {
		t.Errorf("codex --scope project: %v", err)
	}
	out, _, err := cli("__complete", "setup", "")
	if err != nil || !strings.Contains(out, "claude\n") || !strings.Contains(out, "codex\n") || !strings.Contains(out, "cursor\n") {
		t.Errorf("setup completes to %q (%v)", out, err)
	}
	t.Setenv("HERDBRIDGE_COMMAND", "/opt/hb")
	t.Setenv("HERDBRIDGE_ROLE", "worker")
	t.Setenv("HERDBRIDGE_PRINT", "true")
	out, _, err = cli("setup", "claude")
	if err != nil || !strings.Contains(out, `"command": "/opt/hb"`) || !strings.Contains(out, `"worker"`) {
		t.Errorf("setup from the environment: %v\n%s", err, out)
	}
}

// TestSetupPrint: --print shows what setup would write as a diff against
// the files as they are (here: none yet, so every line is added), in the
// client's format, and writes nothing.
func TestSetupPrint(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("CODEX_HOME", filepath.Join(t.TempDir(), "codex"))
	out, _, err := cli("setup", "codex", "--print", "--command", "/usr/local/bin/herdbridge", "--state-dir", "/srv/hb", "--name", "lead")
	if err != nil {
		t.Fatal(err)
	}
	var codex struct {
		MCPServers map[string]clientsetup.Entry `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal([]byte(addedLines(t, out, "config.toml")), &codex); err != nil {
		t.Fatalf("codex --print does not add TOML: %v\n%s", err, out)
	}
	want := clientsetup.Entry{Command: "/usr/local/bin/herdbridge", Args: []string{"mcp", "--default-role", "primary", "--default-name", "lead"}, Env: map[string]string{"HERDBRIDGE_STATE_DIR": "/srv/hb"}}
	if got := codex.MCPServers["herdbridge"]; !entryEqual(got, want) {
		t.Errorf("codex entry %+v, want %+v", got, want)
	}
	for _, client := range []string{"cursor"} {
		out, _, err := cli("setup", client, "--print", "--command", "herdbridge", "--role", "worker")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			MCPServers map[string]clientsetup.Entry `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(addedLines(t, out, "mcp.json")), &doc); err != nil {
			t.Fatalf("%s --print does not add JSON: %v\n%s", client, err, out)
		}
		want := clientsetup.Entry{Command: "herdbridge", Args: []string{"mcp", "--default-role", "worker"}}
		if got := doc.MCPServers["herdbridge"]; !entryEqual(got, want) {
			t.Errorf("%s entry %+v, want %+v", client, got, want)
		}
	}
	if ents, _ := os.ReadDir("."); len(ents) > 0 {
		t.Errorf("--print wrote %v", ents)
	}
	if _, err := os.Stat(os.Getenv("CODEX_HOME")); err == nil {
		t.Errorf("--print created $CODEX_HOME")
	}
}

// addedLines is the new file's text in a --print diff of a file that did
// not exist yet (the one whose name ends in suffix).
func addedLines(t *testing.T, diff, suffix string) string {
	t.Helper()
	var b strings.Builder
	in := false
	for _, l := range strings.SplitAfter(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "):
			in = strings.HasSuffix(strings.TrimSpace(l), suffix)
		case in && strings.HasPrefix(l, "+"):
			b.WriteString(l[1:])
		}
	}
	if b.Len() == 0 {
		t.Fatalf("no file ending in %s added in:\n%s", suffix, diff)
	}
	return b.String()
}

func entryEqual(a, b clientsetup.Entry) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestSetupMerge: setup merges into existing configs and keeps every other
// server and key (and, for config.toml, its comments and layout); a second
// run changes nothing; the instructions land as a skill and an AGENTS.md
// block that a rerun replaces rather than repeats.
func TestSetupMerge(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	t.Setenv("HERDR_ENV", "") // outside herdr: setup claude names the project after its directory
	t.Chdir(proj)
	must := func(args ...string) string {
		t.Helper()
		out, errs, err := cli(append(args, "--command", "herdbridge")...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, errs)
		}
		return out
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	wantEntry := clientsetup.Entry{Command: "herdbridge", Args: []string{"mcp", "--default-role", "primary"}}

	// Claude Code, project and user: JSON with other servers and keys.
	// Outside herdr a project is named after its directory; user scope
	// needs --name (TestSetupClaudeName).
	for _, c := range []struct {
		scope, config, skill string
		args                 []string
		want                 clientsetup.Entry
	}{
		{"project", filepath.Join(proj, ".mcp.json"), filepath.Join(proj, ".claude/skills/herdbridge/SKILL.md"), nil,
			clientsetup.Entry{Command: "herdbridge", Args: []string{"mcp", "--default-role", "primary", "--default-name", filepath.Base(proj)}}},
		{"user", filepath.Join(home, ".claude.json"), filepath.Join(home, ".claude/skills/herdbridge/SKILL.md"), []string{"--name", "me"},
			clientsetup.Entry{Command: "herdbridge", Args: []string{"mcp", "--default-role", "primary", "--default-name", "me"}}},
	} {
		write(c.config, `{"numStartups": 12345678901234567890, "projects": {"/x": {"allowedTools": ["a<b>&c"]}},
 "mcpServers": {"github": {"command": "gh-mcp", "args": ["--x"], "env": {"T": "1"}}, "herdbridge": {"command": "old"}}}`)
		must(append([]string{"setup", "claude", "--scope", c.scope}, c.args...)...)
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(read(c.config)), &doc); err != nil {
			t.Fatal(err)
		}
		if string(doc["numStartups"]) != "12345678901234567890" || !strings.Contains(string(doc["projects"]), `"a<b>&c"`) {
			t.Errorf("claude %s: other keys changed: %s", c.scope, read(c.config))
		}
		var servers map[string]clientsetup.Entry
		_ = json.Unmarshal(doc["mcpServers"], &servers)
		if !entryEqual(servers["github"], clientsetup.Entry{Command: "gh-mcp", Args: []string{"--x"}, Env: map[string]string{"T": "1"}}) || !entryEqual(servers["herdbridge"], c.want) {
			t.Errorf("claude %s: servers %+v", c.scope, servers)
		}
		if st, _ := os.Stat(c.config); st.Mode().Perm() != 0o600 {
			t.Errorf("claude %s: mode %v, want the file's own 0600", c.scope, st.Mode())
		}
		checkSkillFile(t, read(c.skill))
		if out := must(append([]string{"setup", "claude", "--scope", c.scope}, c.args...)...); !strings.Contains(out, "unchanged "+c.config) {
			t.Errorf("claude %s: a second run changed the config:\n%s", c.scope, out)
		}
	}

	// Codex: config.toml with comments, other servers and tables.
	codexCfg := filepath.Join(home, ".codex", "config.toml")
	before := "# my settings\nmodel = \"o3\" # the model\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\nargs = [\"serve\"]\n\n[profiles.fast]\nmodel = \"mini\"\n"
	write(codexCfg, before)
	must("setup", "codex")
	after := read(codexCfg)
	if !strings.HasPrefix(after, before) {
		t.Errorf("codex: the existing file was not kept as it was:\n%s", after)
	}
	var codex struct {
		Model      string                       `toml:"model"`
		MCPServers map[string]clientsetup.Entry `toml:"mcp_servers"`
		Profiles   map[string]any               `toml:"profiles"`
	}
	if err := toml.Unmarshal([]byte(after), &codex); err != nil {
		t.Fatalf("codex: not TOML after the merge: %v\n%s", err, after)
	}
	if codex.Model != "o3" || codex.Profiles["fast"] == nil || codex.MCPServers["docs"].Command != "docs-mcp" || !entryEqual(codex.MCPServers["herdbridge"], wantEntry) {
		t.Errorf("codex: merged config %+v", codex)
	}
	if out := must("setup", "codex"); !strings.Contains(out, "unchanged "+codexCfg) {
		t.Errorf("codex: a second run changed the config:\n%s", out)
	}
	// an older herdbridge table (with a sub-table) is replaced in place
	write(codexCfg, "model = \"o3\"\n\n[mcp_servers.herdbridge]\ncommand = \"old\"\n\n[mcp_servers.herdbridge.env]\nX = \"1\"\n\n[profiles.fast]\nmodel = \"mini\" # keep me\n")
	must("setup", "codex", "--name", "me")
	after = read(codexCfg)
	if err := toml.Unmarshal([]byte(after), &codex); err != nil {
		t.Fatalf("codex: not TOML after replacing: %v\n%s", err, after)
	}
	if strings.Count(after, "[mcp_servers.herdbridge]") != 1 || strings.Contains(after, "X = ") || !strings.HasSuffix(after, "\n\n[profiles.fast]\nmodel = \"mini\" # keep me\n") ||
		!entryEqual(codex.MCPServers["herdbridge"], clientsetup.Entry{Command: "herdbridge", Args: []string{"mcp", "--default-role", "primary", "--default-name", "me"}}) {
		t.Errorf("codex: replacing the old table gave:\n%s", after)
	}
	// a file that does not parse, or an entry setup cannot edit safely, is left alone
	for _, bad := range []string{"model = \n", "mcp_servers.herdbridge.command = \"x\"\n"} {
		write(codexCfg, bad)
		if _, _, err := cli("setup", "codex", "--command", "herdbridge"); err == nil || read(codexCfg) != bad {
			t.Errorf("codex over %q: %v, file now %q", bad, err, read(codexCfg))
		}
	}
	checkAgentsBlock(t, read(filepath.Join(home, ".codex", "AGENTS.md")), "")

	// Cursor, project: .cursor/mcp.json and AGENTS.md with the user's text.
	write(filepath.Join(proj, ".cursor", "mcp.json"), `{"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}`)
	write(filepath.Join(proj, "AGENTS.md"), "# Project rules\n\nRun make test.\n")
	must("setup", "cursor")
	must("setup", "cursor", "--role", "worker") // a rerun replaces the block
	var cursor struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(read(filepath.Join(proj, ".cursor", "mcp.json"))), &cursor); err != nil {
		t.Fatal(err)
	}
	if string(cursor.MCPServers["linear"]) != `{"url": "https://mcp.linear.app/sse"}` && !strings.Contains(string(cursor.MCPServers["linear"]), "mcp.linear.app") {
		t.Errorf("cursor: other server lost: %s", cursor.MCPServers["linear"])
	}
	if !strings.Contains(string(cursor.MCPServers["herdbridge"]), `"worker"`) {
		t.Errorf("cursor: entry %s", cursor.MCPServers["herdbridge"])
	}
	checkAgentsBlock(t, read(filepath.Join(proj, "AGENTS.md")), "# Project rules\n\nRun make test.\n\n")
}

func checkAgentsBlock(t *testing.T, s, prefix string) {
	t.Helper()
	if !strings.HasPrefix(s, prefix) || strings.Count(s, clientsetup.AgentsBegin) != 1 || strings.Count(s, clientsetup.AgentsEnd) != 1 ||
		!strings.HasSuffix(s, clientsetup.AgentsEnd+"\n") || strings.Contains(s, "description:") || !strings.Contains(s, "bridge_poll") {
		t.Errorf("AGENTS.md (want prefix %q, one block):\n%s", prefix, s)
	}
}

// checkSkillFile: a Claude Code skill starts with front matter naming it
// and saying when to use it, and stays short.
func checkSkillFile(t *testing.T, s string) {
	t.Helper()
	m := regexp.MustCompile(`\A---\nname: herdbridge\ndescription: (.+)\n---\n`).FindStringSubmatch(s)
	if m == nil || len(m[1]) > 1024 || !strings.Contains(m[1], "Use when") {
		t.Errorf("skill front matter:\n%s", s[:min(len(s), 400)])
	}
}

// TestSkill: `herdbridge skill` prints the skill: every tool and every
// status a tool returns is explained, in under 60 lines.
func TestSkill(t *testing.T) {
	out, _, err := cli("skill")
	if err != nil {
		t.Fatal(err)
	}
	checkSkillFile(t, out)
	if n := strings.Count(out, "\n"); n >= 60 {
		t.Errorf("the skill is %d lines: it costs context, keep it under 60", n)
	}
	for _, w := range []string{"bridge_send", "bridge_ask", "bridge_poll", "bridge_broadcast", "bridge_roster", "bridge_spawn", "bridge_stop", "bridge_interrupt",
		"`confirmed`", "`submitted`", "`queued`", "`uncertain`", "`failed`", "`replied`", "`asked`", "`pending`", "`drained`", "`peeked`",
		"`empty`", "`answered`", "`no_waiter`", "`expired`", "`abandoned`", "`delivered`", "`too_late`", "`already_answered`", "`deduped", "`next`", "`held`"} {
		if !strings.Contains(out, w) {
			t.Errorf("the skill does not mention %s", w)
		}
	}
	block, _, err := cli("skill", "--agents-md")
	if err != nil {
		t.Fatal(err)
	}
	checkAgentsBlock(t, block, "")
}

// TestMCPDefaults: the entry setup writes (mcp --default-name/--default-role)
// gives way to a spawned worker's $HERDBRIDGE_NAME/$HERDBRIDGE_ROLE, and
// applies when they are not set.
func TestMCPDefaults(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	gatewaytest.StartLocal(t, dir)
	roles := func() map[string]string {
		t.Helper()
		r, err := gateway.Ask(dir, gateway.Request{Op: "roster"})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, e := range r.Roster.Entities {
			m[e.Name] = string(e.Role)
		}
		return m
	}
	mcp := func() {
		t.Helper()
		if _, errs, err := cli("mcp", "--state-dir", dir, "--default-name", "lead", "--default-role", "primary"); err != nil {
			t.Fatalf("mcp: %v\n%s", err, errs)
		}
	}
	t.Setenv("HERDBRIDGE_NAME", "spawned-1")
	t.Setenv("HERDBRIDGE_ROLE", "worker")
	mcp()
	if m := roles(); m["spawned-1"] != "worker" || m["lead"] != "" {
		t.Fatalf("with the spawn's environment: %v, want spawned-1 as a worker and no lead", m)
	}
	t.Setenv("HERDBRIDGE_NAME", "")
	t.Setenv("HERDBRIDGE_ROLE", "")
	mcp()
	if m := roles(); m["lead"] != "primary" {
		t.Fatalf("without it: %v, want lead as the primary", m)
	}
}
