package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSetupGeminiPi: setup gemini merges herdbridge (named without an
// underscore, trust: true) into Gemini's settings.json keeping the user's
// other settings and servers, and --no-allow leaves trust out; setup pi
// writes pi-mcp-adapter's own file with directTools and the long request
// timeout; both put the instructions where the client reads them, each at
// the scope asked for.
func TestSetupGeminiPi(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GEMINI_CLI_HOME", "")
	t.Setenv("PI_CODING_AGENT_DIR", "")
	t.Chdir(proj)
	run := func(args ...string) (string, string) {
		t.Helper()
		out, errs, err := cli(append(args, "--command", "herdbridge", "--name", "lead")...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, errs)
		}
		return out, errs
	}
	userGemini := filepath.Join(home, ".gemini", "settings.json")
	writeFile(t, userGemini, `{"security":{"auth":{"selectedType":"gemini-api-key"}},"ui":{"theme":"x<y>"},
 "mcpServers":{"github":{"command":"gh-mcp","trust":false},"herdbridge":{"command":"old"}}}`)
	_, errs := run("setup", "gemini") // user scope by default
	doc := readJSON(t, userGemini)
	if !reflect.DeepEqual(doc["security"], map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}) || !reflect.DeepEqual(doc["ui"], map[string]any{"theme": "x<y>"}) {
		t.Errorf("gemini: the user's settings changed: %v", doc)
	}
	servers, _ := doc["mcpServers"].(map[string]any)
	want := map[string]any{"command": "herdbridge", "args": []any{"mcp", "--default-role", "primary", "--default-name", "lead"}, "trust": true}
	if !reflect.DeepEqual(servers["herdbridge"], want) || !reflect.DeepEqual(servers["github"], map[string]any{"command": "gh-mcp", "trust": false}) {
		t.Errorf("gemini servers %v", servers)
	}
	for name := range servers {
		if strings.Contains(name, "_") {
			t.Errorf("server %q: Gemini's policy parser splits at the first underscore", name)
		}
	}
	if !strings.Contains(errs, "--skip-trust") {
		t.Errorf("gemini: no word on headless runs in untrusted folders: %q", errs)
	}
	checkAgentsFile(t, filepath.Join(home, ".gemini", "GEMINI.md"))
	if st, _ := os.Stat(userGemini); st.Mode().Perm() != 0o600 {
		t.Errorf("gemini: mode %v", st.Mode())
	}
	run("setup", "gemini", "--no-allow")
	if s := readJSON(t, userGemini)["mcpServers"].(map[string]any)["herdbridge"].(map[string]any); s["trust"] != nil {
		t.Errorf("gemini --no-allow kept trust: %v", s)
	}

	_, errs = run("setup", "gemini", "--scope", "project")
	if s := readJSON(t, filepath.Join(proj, ".gemini", "settings.json"))["mcpServers"].(map[string]any)["herdbridge"].(map[string]any); s["trust"] != true {
		t.Errorf("gemini project entry %v", s)
	}
	checkAgentsFile(t, filepath.Join(proj, "GEMINI.md"))
	if !strings.Contains(errs, "trusted folder") {
		t.Errorf("gemini project: no word on folder trust: %q", errs)
	}

	for _, c := range []struct{ scope, config, agents string }{
		{"project", filepath.Join(proj, ".pi", "mcp.json"), filepath.Join(proj, "AGENTS.md")},
		{"user", filepath.Join(home, ".pi", "agent", "mcp.json"), filepath.Join(home, ".pi", "agent", "AGENTS.md")},
	} {
		writeFile(t, c.config, `{"settings":{"toolPrefix":"server"},"mcpServers":{"other":{"command":"o"}}}`)
		_, errs := run("setup", "pi", "--scope", c.scope)
		doc := readJSON(t, c.config)
		s := doc["mcpServers"].(map[string]any)
		want := map[string]any{"command": "herdbridge", "args": []any{"mcp", "--default-role", "primary", "--default-name", "lead"},
			"directTools": true, "requestTimeoutMs": float64(600_000)}
		if !reflect.DeepEqual(s["herdbridge"], want) || s["other"] == nil || doc["settings"] == nil {
			t.Errorf("pi %s: %v", c.scope, doc)
		}
		checkAgentsFile(t, c.agents)
		if !strings.Contains(errs, "@earendil-works/pi-coding-agent@npm:@mariozechner/pi-coding-agent@0.73.1") {
			t.Errorf("pi %s: no word on loading the adapter: %q", c.scope, errs)
		}
	}
	// Outside herdr without --name: a project gets its directory's name;
	// user scope refuses, naming the flag.
	t.Setenv("HERDR_ENV", "")
	for _, client := range []string{"gemini", "pi"} {
		if _, _, err := cli("setup", client, "--scope", "user", "--command", "herdbridge"); err == nil || !strings.Contains(err.Error(), "--name") {
			t.Errorf("%s --scope user without --name: %v, want a refusal naming --name", client, err)
		}
	}
	if _, errs, err := cli("setup", "pi", "--command", "herdbridge"); err != nil {
		t.Fatalf("pi without --name: %v\n%s", err, errs)
	}
	args := readJSON(t, filepath.Join(proj, ".pi", "mcp.json"))["mcpServers"].(map[string]any)["herdbridge"].(map[string]any)["args"].([]any)
	if len(args) != 5 || args[3] != "--default-name" || args[4] == "" {
		t.Errorf("pi without --name: args %v, want a derived --default-name", args)
	}

	// --print: the diff of each file, nothing written.
	fresh := t.TempDir()
	t.Chdir(fresh)
	for _, c := range []struct{ client, file, line string }{
		{"pi", filepath.Join(fresh, ".pi", "mcp.json"), `+      "directTools": true,`},
		{"gemini", filepath.Join(fresh, ".gemini", "settings.json"), `+      "trust": true`},
	} {
		out, _ := run("setup", c.client, "--scope", "project", "--print")
		if !strings.Contains(out, "--- /dev/null\n+++ "+c.file+"\n") || !strings.Contains(out, c.line+"\n") {
			t.Errorf("%s --print: want a diff creating %s with %q:\n%s", c.client, c.file, c.line, out)
		}
		if _, err := os.Stat(c.file); err == nil {
			t.Errorf("%s --print wrote %s", c.client, c.file)
		}
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return doc
}

// checkAgentsFile: a new instructions file is the block alone.
func checkAgentsFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkAgentsBlock(t, string(b), "")
}
