package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

const claudeTools = "mcp__herdbridge__"

// TestClaudeCodeHeadless runs the pinned Claude Code (testdata/clis/claude)
// headless against a real gateway, configured by nothing but
// `herdbridge setup claude` in a temp project and a temp HOME: the scripted
// model loads the bridge tools (Claude Code defers MCP schemas behind
// ToolSearch), lists the roster, briefs a worker with wait_s and gets its
// reply (replied), drains a held message (drained), and long-polls past the
// gateway's lowered --max-wait (pending). No permission flag is passed: if
// setup's allow rules or server approval were missing, Claude Code would
// refuse the calls and the model would see the refusal instead.
func TestClaudeCodeHeadless(t *testing.T) {
	f := newClaudeFixture(t, "--max-wait", "3s")
	f.setup(t, "--name", "lead")
	exe, bin, state, proj, home, gw := f.exe, f.bin, f.state, f.proj, f.home, f.gw
	startPeer(t, bin, state, "peer", replyTwice(t))
	for _, f := range []string{".mcp.json", ".claude/settings.local.json"} {
		b, _ := os.ReadFile(filepath.Join(proj, f))
		t.Logf("%s:\n%s", f, b)
	}

	script := fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: "ToolSearch", Args: map[string]any{"query": "select:" + claudeTools + "bridge_roster," + claudeTools + "bridge_send," + claudeTools + "bridge_poll"}},
		fakemodel.ToolCall{Name: claudeTools + "bridge_roster", Args: map[string]any{"list": true}}, // the listing: the default summary names only the caller's circle
		fakemodel.ToolCall{Name: claudeTools + "bridge_send", Args: map[string]any{"target": "peer", "message": "brief one: say hi", "wait_s": 20}},
		fakemodel.ToolCall{Name: claudeTools + "bridge_poll", Args: map[string]any{"wait_s": 10}},
		fakemodel.ToolCall{Name: claudeTools + "bridge_poll", Args: map[string]any{"wait_s": 10}},
	)
	res := runClaude(t, claudeRun{Exe: exe, Dir: proj, Home: home, Prompt: "use the bridge", Script: script})
	seen := res.Record.LastResults()
	for i, s := range seen {
		t.Logf("tool result %d (%s, error %v):\n%s", i, s.Tool, s.IsError, s.Content)
	}
	if res.Err != nil || len(seen) != 5 {
		t.Errorf("gateway log:\n%s", gw.log())
		t.Fatalf("claude -p: %v, %d tool results, want 5\nstdout: %s\nstderr: %s\nunknown requests: %v", res.Err, len(seen), res.Stdout, res.Stderr, res.Unknown)
	}
	logPayload(t, "claude", "replied", seen[2].Content)
	logPayload(t, "claude", "drained", seen[3].Content)
	logPayload(t, "claude", "pending", seen[4].Content)
	// the bridge tools are deferred (what the README says of 2.1.328):
	// not in the first request's tools, there once ToolSearch loaded them
	turns := res.Record.Turns()
	if slices.Contains(turns[0].Tools, claudeTools+"bridge_send") || !slices.Contains(turns[1].Tools, claudeTools+"bridge_send") {
		t.Errorf("tools offered: first request %v; after ToolSearch %v", turns[0].Tools, turns[1].Tools)
	}
	wantStatus := []string{"", "", "replied", "drained", "pending"}
	for i, s := range seen[1:] {
		var v map[string]any
		if err := json.Unmarshal([]byte(s.Content), &v); err != nil || s.IsError {
			t.Errorf("%s: the model saw %q (error %v), not a JSON result", s.Tool, s.Content, s.IsError)
			continue
		}
		if w := wantStatus[i+1]; w != "" && v["status"] != w {
			t.Errorf("%s: status %v, want %s", s.Tool, v["status"], w)
		}
	}
	// Claude Code hands the model JSON.stringify(structuredContent) alone:
	// what to do after pending must be in it
	var pending struct{ Status, Next string }
	if json.Unmarshal([]byte(seen[4].Content), &pending) != nil || pending.Next == "" {
		t.Errorf("pending without a next the model can read: %s", seen[4].Content)
	}
	if !strings.Contains(seen[1].Content, `"peer"`) {
		t.Errorf("roster does not list peer: %s", seen[1].Content)
	}
	if !strings.Contains(seen[2].Content, "hi from peer") || !strings.Contains(seen[3].Content, "a note from peer") {
		t.Errorf("replied/drained do not carry the peer's words:\n%s\n%s", seen[2].Content, seen[3].Content)
	}
}

// claudeFixture is a built herdbridge, a running gateway, the pinned
// Claude Code, and a temp project and HOME for it.
type claudeFixture struct {
	exe, bin, state, proj, home string
	gw                          *sdkGatewayProc
}

func newClaudeFixture(t *testing.T, gatewayFlags ...string) *claudeFixture {
	t.Helper()
	f := &claudeFixture{exe: claudeCLI(t), bin: filepath.Join(t.TempDir(), "herdbridge")}
	if out, err := exec.Command("go", "build", "-o", f.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f.state = gatewaytest.TempDir(t) // the unix socket path must stay under ~100 bytes
	f.gw = startSDKGateway(t, f.bin, f.state, gatewayFlags...)
	f.proj, f.home = t.TempDir(), t.TempDir()
	return f
}

// setup runs `herdbridge setup claude` in the project, HOME the fixture's.
func (f *claudeFixture) setup(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(f.bin, append([]string{"setup", "claude", "--state-dir", f.state, "--command", f.bin}, args...)...)
	cmd.Dir, cmd.Env = f.proj, claudeEnv(f.home, "")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("setup claude: %v\n%s", err, out)
	}
}

// TestClaudeCodeWorkerArgs: what a spawn of kind claude adds to the command
// line (herdr.KindArgs, asserted against the fake herdr in
// herdr.TestSpawnClaudeWorker) is all the real CLI needs: in a directory
// with no herdbridge config at all, with the spawn's environment, the model
// has no bridge tool without the args, and with them it calls one with no
// permission prompt and sees itself registered under the spawn's name.
func TestClaudeCodeWorkerArgs(t *testing.T) {
	f := newClaudeFixture(t)
	script := fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: "ToolSearch", Args: map[string]any{"query": "select:" + claudeTools + "bridge_roster"}},
		fakemodel.ToolCall{Name: claudeTools + "bridge_roster", Args: map[string]any{}},
	)
	env := []string{"HERDBRIDGE_NAME=rev-1", "HERDBRIDGE_ROLE=worker", "HERDBRIDGE_STATE_DIR=" + f.state, "HERDBRIDGE_SPAWN_ID=0b3c0000-0000-4000-8000-000000000001"}
	for _, c := range []struct {
		args  []string
		works bool
	}{{nil, false}, {herdr.KindArgs("claude", f.bin, f.state), true}} {
		res := runClaude(t, claudeRun{Exe: f.exe, Dir: f.proj, Home: f.home, Prompt: "roster", Script: script, Args: c.args, Env: env})
		seen := res.Record.LastResults()
		if res.Err != nil || len(seen) != 2 {
			t.Fatalf("args %q: %v, results %+v\n%s%s", c.args, res.Err, seen, res.Stdout, res.Stderr)
		}
		works := !seen[1].IsError && strings.Contains(seen[1].Content, `"name":"rev-1"`) && strings.Contains(seen[1].Content, `"role":"worker"`)
		if works != c.works {
			t.Errorf("args %q: the model saw %q (error %v), want working %v", c.args, seen[1].Content, seen[1].IsError, c.works)
		}
	}
}

// peerCall calls one bridge tool as the peer and returns the result's
// structuredContent as JSON.
type peerCall func(tool string, args map[string]any) (string, error)

// startPeer registers name as a worker, connects it over HTTP MCP, and runs
// act with it in the background (until act returns or the test ends).
func startPeer(t *testing.T, bin, state, name string, act func(ctx context.Context, call peerCall)) {
	t.Helper()
	out, err := exec.Command(bin, "register", "--name", name, "--role", "worker", "--state-dir", state).Output()
	if err != nil {
		t.Fatalf("register %s: %v\n%s", name, err, sdkStderrOf(err))
	}
	var reg struct{ Token, URL string }
	if err := json.Unmarshal(out, &reg); err != nil || reg.Token == "" {
		t.Fatalf("register printed %q (%v)", out, err)
	}
	hc, err := client.NewStreamableHttpClient(reg.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + reg.Token}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; hc.Close() })
	if err := hc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: name, Version: "1"}
	if _, err := hc.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args map[string]any) (string, error) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = tool, args
		r, err := hc.CallTool(ctx, req)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(r.StructuredContent)
		return string(b), nil
	}
	go func() { defer close(done); act(ctx, call) }()
}

// awaitBrief long-polls as the peer until a message containing want
// arrives; false when the test ends first.
func awaitBrief(ctx context.Context, call peerCall, want string) bool {
	for ctx.Err() == nil {
		got, err := call("bridge_poll", map[string]any{"wait_s": 3})
		if err != nil {
			return false
		}
		if strings.Contains(got, want) {
			return true
		}
	}
	return false
}

// replyTwice is the headless test's peer: it waits for "brief one",
// replies "hi from peer", then sends "a note from peer" (held for the
// primary until it polls).
func replyTwice(t *testing.T) func(context.Context, peerCall) {
	return func(ctx context.Context, call peerCall) {
		if !awaitBrief(ctx, call, "brief one") {
			return
		}
		if _, err := call("bridge_send", map[string]any{"target": "lead", "message": "hi from peer"}); err != nil {
			t.Logf("peer reply: %v", err)
			return
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := call("bridge_send", map[string]any{"target": "lead", "message": "a note from peer"}); err != nil {
			t.Logf("peer note: %v", err)
		}
	}
}

// TestClaudeCodeAnswersAsk: a Claude Code primary briefs a worker with
// wait_s; the worker asks a question mid-turn, which ends the wait with
// asked and a turnId the model reads from the result; the model answers with
// bridge_send(turn_id), the worker gets it (answered) and replies, and the
// model's poll drains the reply. The script decides from what the model
// saw, as a model would.
func TestClaudeCodeAnswersAsk(t *testing.T) {
	f := newClaudeFixture(t)
	f.setup(t, "--name", "lead")
	answered := make(chan string, 1)
	startPeer(t, f.bin, f.state, "peer", func(ctx context.Context, call peerCall) {
		if !awaitBrief(ctx, call, "brief two") {
			return
		}
		got, err := call("bridge_ask", map[string]any{"question": "which branch?"})
		if err != nil {
			t.Logf("peer ask: %v", err)
			return
		}
		answered <- got
		_, _ = call("bridge_send", map[string]any{"target": "lead", "message": "done on the branch you named"})
	})
	script := func(tr fakemodel.Turn) fakemodel.Step {
		call := func(tool string, args map[string]any) fakemodel.Step {
			return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: tool, Args: args}}}
		}
		switch r := tr.Results; len(r) {
		case 0:
			return call("ToolSearch", map[string]any{"query": "select:" + claudeTools + "bridge_send," + claudeTools + "bridge_poll"})
		case 1:
			return call(claudeTools+"bridge_send", map[string]any{"target": "peer", "message": "brief two: fix the build", "wait_s": 30})
		case 2:
			var asked struct{ Status, TurnID string }
			if json.Unmarshal([]byte(r[1].Content), &asked); asked.Status != "asked" || asked.TurnID == "" {
				return fakemodel.Step{Text: "the send did not come back asked"}
			}
			return call(claudeTools+"bridge_send", map[string]any{"turn_id": asked.TurnID, "message": "main"})
		case 3:
			return call(claudeTools+"bridge_poll", map[string]any{"target": "peer", "wait_s": 30})
		}
		return fakemodel.Step{Text: "done"}
	}
	res := runClaude(t, claudeRun{Exe: f.exe, Dir: f.proj, Home: f.home, Prompt: "brief the peer", Script: script})
	seen := res.Record.LastResults()
	for i, s := range seen {
		t.Logf("tool result %d (%s, error %v):\n%s", i, s.Tool, s.IsError, s.Content)
	}
	if res.Err != nil || len(seen) != 4 {
		t.Errorf("gateway log:\n%s", f.gw.log())
		t.Fatalf("claude -p: %v, %d tool results, want 4\nstdout: %s\nstderr: %s", res.Err, len(seen), res.Stdout, res.Stderr)
	}
	logPayload(t, "claude", "drained", seen[3].Content)
	for i, want := range map[int]string{1: `"status":"asked"`, 2: `"status":"delivered"`, 3: `"status":"drained"`} {
		if !strings.Contains(seen[i].Content, want) {
			t.Errorf("result %d: %s, want %s", i, seen[i].Content, want)
		}
	}
	if !strings.Contains(seen[1].Content, "which branch?") || !strings.Contains(seen[3].Content, "done on the branch you named") {
		t.Errorf("the model did not see the question or the reply:\n%s\n%s", seen[1].Content, seen[3].Content)
	}
	select {
	case got := <-answered:
		if !strings.Contains(got, `"status":"answered"`) || !strings.Contains(got, "main") {
			t.Errorf("the worker's ask returned %s", got)
		}
	default:
		t.Error("the worker's ask did not return")
	}
}

// TestClaudeCodeShowsRefusal: when the name setup wrote is held by a live
// session (a second Claude Code in the same folder), the person sees why in
// Claude Code's own server status, not "Connection closed": `claude mcp
// list` and `claude mcp get` show herdbridge's sentence (they show an
// initialize error's message; a server's stderr they do not show). Without
// the refusal server the status was "CONNECTION_CLOSED: Connection closed".
func TestClaudeCodeShowsRefusal(t *testing.T) {
	f := newClaudeFixture(t)
	f.setup(t, "--name", "lead")
	holder := exec.Command(f.bin, "mcp", "--state-dir", f.state, "--name", "lead", "--role", "primary")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = holder.Wait() })
	gatewaytest.Eventually(t, 10*time.Second, "lead holds its name", func() bool {
		out, _ := exec.Command(f.bin, "roster", "--json", "--state-dir", f.state).Output()
		return strings.Contains(string(out), `"name":"lead"`) && strings.Contains(string(out), `"sessions":1`)
	})
	for _, sub := range [][]string{{"mcp", "list"}, {"mcp", "get", "herdbridge"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, f.exe, sub...)
		cmd.Dir, cmd.Env = f.proj, claudeEnv(f.home, "http://127.0.0.1:9")
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("claude %s (%v):\n%s", strings.Join(sub, " "), err, out)
		// Claude Code redacts from an error every value of the server's
		// command line (the name and role setup wrote): `name "[redacted]"`
		if !strings.Contains(string(out), `herdbridge mcp cannot start: name "`) || !strings.Contains(string(out), `is in use by a live session`) || !strings.Contains(string(out), "--takeover") {
			t.Errorf("claude %s does not show the refusal", strings.Join(sub, " "))
		}
	}
}
