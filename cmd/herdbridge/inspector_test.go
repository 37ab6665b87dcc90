package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestInspectorCLI drives a real gateway process with a second third-party
// client, the MCP Inspector in its --cli mode (testdata/inspector pins its
// version): tools/list with --strict (which reports any tool schema a
// single-type client could mistype), and a bridge_send and a bridge_poll
// with numeric arguments, over stdio (`herdbridge mcp`) and over streamable
// HTTP with a bearer header (written in lower case once: the scheme is
// case-insensitive). The Inspector passes every --tool-arg as text and
// converts it by the schema, so a number only arrives as a number when the
// schema types it plainly. A wrong token must show herdbridge's message,
// not an OAuth login. Like TestTypeScriptSDK it needs node and npm: without
// them it skips locally and fails in CI.
func TestInspectorCLI(t *testing.T) {
	node, npm := needNode(t, "the MCP Inspector test")
	dir := npmTestdata(t, npm, "inspector", "@modelcontextprotocol/inspector", "--ignore-scripts")
	launcher := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")

	bin := filepath.Join(t.TempDir(), "herdbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := gatewaytest.TempDir(t) // the unix socket path must stay under ~100 bytes
	gw := startSDKGateway(t, bin, state)
	out, err := exec.Command(bin, "register", "--name", "insp-primary", "--role", "primary", "--state-dir", state).Output()
	if err != nil {
		t.Fatalf("register: %v\n%s%s", err, out, sdkStderrOf(err))
	}
	var reg struct{ Token, URL string }
	if err := json.Unmarshal(out, &reg); err != nil || reg.Token == "" {
		t.Fatalf("register printed %q (%v)", out, err)
	}

	home := t.TempDir() // the Inspector keeps its catalog and OAuth store under $HOME
	// inspect runs one Inspector CLI command against target (a URL, or the
	// command line of a stdio server) and returns its stdout and stderr.
	inspect := func(target []string, args ...string) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		argv := append([]string{launcher, "--cli"}, target...)
		cmd := exec.CommandContext(ctx, node, append(argv, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+home, "MCP_AUTO_OPEN_ENABLED=false")
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		t.Logf("inspector %s (%v, err %v)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err)
		return stdout.String(), stderr.String(), err
	}
	httpAs := func(auth string) []string {
		return []string{reg.URL, "--transport", "http", "--header", "Authorization: " + auth}
	}
	primary := httpAs("Bearer " + reg.Token)
	worker := []string{bin, "mcp", "--name", "insp-worker", "--role", "worker", "--state-dir", state}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("gateway log:\n%s", gw.log())
		t.Fatalf(format, args...)
	}

	for _, c := range []struct {
		name   string
		target []string
	}{{"http", primary}, {"stdio", worker}} {
		stdout, stderr, err := inspect(c.target, "--method", "tools/list", "--strict")
		if err != nil || strings.Contains(strings.ToLower(stderr), "warning") {
			fail("%s: tools/list --strict: %v\nstderr: %s\nstdout: %s", c.name, err, stderr, stdout)
		}
		var list struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			fail("%s: tools/list printed %q: %v", c.name, stdout, err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		if got := strings.Join(names, ","); got != "bridge_ask,bridge_broadcast,bridge_history,bridge_interrupt,bridge_poll,bridge_roster,bridge_send,bridge_spawn,bridge_stop" {
			fail("%s: tools %s", c.name, got)
		}
	}

	// call runs tools/call and returns the result's structured content and text.
	call := func(target []string, tool string, args ...string) (map[string]any, string) {
		t.Helper()
		argv := []string{"--method", "tools/call", "--tool-name", tool}
		for _, a := range args {
			argv = append(argv, "--tool-arg", a)
		}
		stdout, stderr, err := inspect(target, argv...)
		var res struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
		}
		if jerr := json.Unmarshal([]byte(stdout), &res); err != nil || jerr != nil || res.IsError {
			fail("%s %v: %v (%v)\nstdout: %s\nstderr: %s", tool, args, err, jerr, stdout, stderr)
		}
		var text strings.Builder
		for _, c := range res.Content {
			text.WriteString(c.Text)
		}
		return res.StructuredContent, text.String()
	}
	status := func(sc map[string]any) string { s, _ := sc["status"].(string); return s }

	// the worker reports over stdio; the primary long-polls over HTTP
	if sc, _ := call(worker, "bridge_send", "target=insp-primary", "message=report from the worker", "wait_s=0"); status(sc) != "confirmed" {
		fail("worker's bridge_send: %v", sc)
	}
	sc, text := call(httpAs("bearer "+reg.Token), "bridge_poll", "wait_s=5", "max=10")
	if msgs, _ := sc["messages"].([]any); status(sc) != "drained" || len(msgs) != 1 ||
		msgs[0].(map[string]any)["body"] != "report from the worker" || !strings.Contains(text, "<<<body-") {
		fail("primary's bridge_poll: %v\ntext: %s", sc, text)
	}
	// the primary briefs over HTTP and waits a second for a reply that does
	// not come; the worker drains the brief over stdio
	if sc, _ := call(primary, "bridge_send", "target=insp-worker", "message=a brief", "wait_s=1"); status(sc) != "pending" {
		fail("primary's bridge_send: %v", sc)
	}
	sc, _ = call(worker, "bridge_poll", "max=5", "wait_s=5")
	if msgs, _ := sc["messages"].([]any); status(sc) != "drained" || len(msgs) != 1 || msgs[0].(map[string]any)["body"] != "a brief" {
		fail("worker's bridge_poll: %v", sc)
	}

	// a refused token shows what to do (--stored-auth-only: no OAuth login)
	stdout, stderr, err := inspect(httpAs("Bearer hb_wrong"), "--stored-auth-only", "--method", "tools/list")
	if err == nil || !strings.Contains(stdout+stderr, "invalid_token") || !strings.Contains(stdout+stderr, "herdbridge register") {
		fail("wrong token: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
}
