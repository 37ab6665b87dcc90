package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// codexFixture is a built herdbridge, a gateway on a temp state dir
// (a short --max-wait, so a long poll turns pending in seconds) and the
// pinned Codex CLI.
type codexFixture struct {
	codex, bin, dir string
	gw              *sdkGatewayProc
}

func newCodexFixture(t *testing.T, maxWait string) *codexFixture {
	t.Helper()
	codex := codexCLI(t)
	bin := filepath.Join(t.TempDir(), "herdbridge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := gatewaytest.TempDir(t) // the unix socket path must stay under ~100 bytes
	return &codexFixture{codex: codex, bin: bin, dir: dir, gw: startSDKGateway(t, bin, dir, "--max-wait", maxWait)}
}

// register makes an entity with a token and connects to it over HTTP:
// the other side of the conversation, driven by the test.
func (f *codexFixture) register(t *testing.T, name, role string) *gatewaytest.Conn {
	t.Helper()
	out, err := exec.Command(f.bin, "register", "--name", name, "--role", role, "--state-dir", f.dir).Output()
	if err != nil {
		t.Fatalf("register %s: %v\n%s", name, err, sdkStderrOf(err))
	}
	var r struct{ Token, URL string }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("register printed %q: %v", out, err)
	}
	return gatewaytest.TokenConn(t, strings.TrimSuffix(r.URL, "/mcp"), name, r.Token)
}

// TestCodexExecAfterSetup is the Codex row: after only
// `herdbridge setup codex` (and the test's model provider), headless
// `codex exec` with no approval flag calls roster → send → poll (drained)
// → send with wait_s (replied) → a long poll that comes back pending, and
// the model sees each result — the JSON of structuredContent — with no
// "requires approval" refusal.
func TestCodexExecAfterSetup(t *testing.T) {
	f := newCodexFixture(t, "3s")
	worker := f.register(t, "w1", "worker")
	var mu sync.Mutex
	var sideErr error
	workerCall := func(tool string, args map[string]any) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if r, err := worker.CallCtx(ctx, tool, args); err != nil || r.IsError {
			mu.Lock()
			sideErr = errors.Join(sideErr, fmt.Errorf("worker %s: %v %s", tool, err, r.Text))
			mu.Unlock()
		}
	}
	var replied sync.WaitGroup
	calls := []fakemodel.ToolCall{
		{Name: "mcp__herdbridge__bridge_roster", Args: map[string]any{"list": true}}, // the listing: the default summary names only the caller's circle
		{Name: "mcp__herdbridge__bridge_send", Args: map[string]any{"target": "w1", "message": "brief-1: count the files"}},
		{Name: "mcp__herdbridge__bridge_poll", Args: map[string]any{"target": "w1"}},
		{Name: "mcp__herdbridge__bridge_send", Args: map[string]any{"target": "w1", "message": "brief-2: and the dirs?", "wait_s": 20}},
		{Name: "mcp__herdbridge__bridge_poll", Args: map[string]any{"wait_s": 30}},
	}
	script := func(tn fakemodel.Turn) fakemodel.Step {
		switch len(tn.Results) {
		case 2: // brief-1 went out: the worker reads it and answers before the model polls
			workerCall("bridge_poll", map[string]any{"wait_s": 10})
			workerCall("bridge_send", map[string]any{"target": "lead", "message": "reply-1: 42 files"})
		case 3: // the model is about to send brief-2 and wait: the worker reads it and replies meanwhile
			replied.Add(1)
			go func() {
				defer replied.Done()
				workerCall("bridge_poll", map[string]any{"wait_s": 15})
				workerCall("bridge_send", map[string]any{"target": "lead", "message": "reply-2: 5 dirs"})
			}()
		}
		return fakemodel.Sequence("all done", calls...)(tn)
	}
	res := runCodex(t, codexRun{Codex: f.codex, Herdbridge: f.bin, StateDir: f.dir, Name: "lead",
		Prompt: "Check in with worker w1 over herdbridge.", Script: script})
	replied.Wait()
	if res.Err != nil || !strings.Contains(res.Output, "all done") {
		t.Fatalf("codex exec: %v\n%s\ngateway log:\n%s", res.Err, res.Output, f.gw.log())
	}
	if sideErr != nil {
		t.Fatalf("the worker's reply: %v", sideErr)
	}
	seen := codexResults(t, res.Record)
	if len(seen) != len(calls) {
		t.Fatalf("the model saw %d results, want %d: %+v\n%s", len(seen), len(calls), seen, res.Output)
	}
	for i, s := range seen {
		t.Logf("model saw for %s:\n%s", s.Tool, s.Raw)
		if s.Tool != calls[i].Name || strings.Contains(s.Raw, "requires approval") || s.Payload == "" {
			t.Errorf("result %d: %+v", i, s)
		}
	}
	logPayload(t, "codex", "drained", seen[2].Raw)
	logPayload(t, "codex", "replied", seen[3].Raw)
	logPayload(t, "codex", "pending", seen[4].Raw)
	var roster bridge.RosterView
	if err := json.Unmarshal([]byte(seen[0].Payload), &roster); err != nil || !rosterHas(roster, "lead", "primary") || !rosterHas(roster, "w1", "worker") {
		t.Errorf("roster as the model saw it (%v): %s", err, seen[0].Payload)
	}
	if seen[1].Status != bridge.StatusConfirmed {
		t.Errorf("send: %s", seen[1].Payload)
	}
	var drained bridge.Result
	if err := json.Unmarshal([]byte(seen[2].Payload), &drained); err != nil || drained.Status != bridge.StatusDrained ||
		len(drained.Messages) != 1 || !strings.Contains(drained.Messages[0].Body, "reply-1: 42 files") || drained.Messages[0].FromName != "w1" {
		t.Errorf("drained poll (%v): %s", err, seen[2].Payload)
	}
	var reply bridge.Result
	if err := json.Unmarshal([]byte(seen[3].Payload), &reply); err != nil || reply.Status != bridge.StatusReplied ||
		len(reply.Messages) != 1 || !strings.Contains(reply.Messages[0].Body, "reply-2: 5 dirs") || reply.Messages[0].Corr != reply.MsgID {
		t.Errorf("send with wait_s (%v): %s", err, seen[3].Payload)
	}
	var pending bridge.Result
	if err := json.Unmarshal([]byte(seen[4].Payload), &pending); err != nil || pending.Status != bridge.StatusPending || pending.Next == "" {
		t.Errorf("long poll (%v): %s", err, seen[4].Payload)
	}
}

// TestCodexNoAllowAsksBeforeDestroying: with --no-allow the person
// decides, and Codex goes by the tools' annotations alone: it calls the
// read-only and additive tools without asking, and under exec (which
// cannot ask) refuses bridge_stop, which closes a worker's pane.
func TestCodexNoAllowAsksBeforeDestroying(t *testing.T) {
	f := newCodexFixture(t, "3s")
	f.register(t, "w1", "worker")
	calls := []fakemodel.ToolCall{
		{Name: "mcp__herdbridge__bridge_poll", Args: map[string]any{}},
		{Name: "mcp__herdbridge__bridge_stop", Args: map[string]any{"target": "w1"}},
	}
	res := runCodex(t, codexRun{Codex: f.codex, Herdbridge: f.bin, StateDir: f.dir, Name: "lead", SetupArgs: []string{"--no-allow"},
		Prompt: "Collect and stop w1.", Script: fakemodel.Sequence("ok", calls...)})
	if res.Err != nil {
		t.Fatalf("codex exec: %v\n%s", res.Err, res.Output)
	}
	seen := codexResults(t, res.Record)
	if len(seen) != 2 || seen[0].Status != bridge.StatusEmpty || !strings.Contains(seen[1].Raw, "requires approval") {
		t.Fatalf("without approvals: %+v", seen)
	}
}

func rosterHas(v bridge.RosterView, name, role string) bool {
	for _, e := range v.Entities {
		if e.Name == name && string(e.Role) == role {
			return true
		}
	}
	return false
}

// TestCodexSpawnedWorkerArgs: what bridge_spawn gives a Codex worker
// (herdr.CodexWorkerArgs) is enough on its own — no setup, an empty
// CODEX_HOME — for the real CLI to register under the worker's own name
// and call the bridge without a dialog: its model sees the bridge tools,
// and its reply reaches the primary.
func TestCodexSpawnedWorkerArgs(t *testing.T) {
	f := newCodexFixture(t, "3s")
	lead := f.register(t, "lead", "primary")
	identity := map[string]string{"HERDBRIDGE_NAME": "cx-1", "HERDBRIDGE_ROLE": "worker", "HERDBRIDGE_STATE_DIR": f.dir,
		"HERDBRIDGE_SPAWN_ID": "0b3c0000-0000-4000-8000-0000000000c1"}
	args := herdr.CodexWorkerArgs(f.bin, identity) // the built binary, as the gateway's own would be
	calls := []fakemodel.ToolCall{
		{Name: "mcp__herdbridge__bridge_roster", Args: map[string]any{}},
		{Name: "mcp__herdbridge__bridge_send", Args: map[string]any{"target": "lead", "message": "done: 7 files"}},
	}
	res := runCodex(t, codexRun{Codex: f.codex, Herdbridge: f.bin, StateDir: f.dir, NoSetup: true, Args: args,
		Prompt: "Report to lead.", Script: fakemodel.Sequence("reported", calls...)})
	if res.Err != nil || !strings.Contains(res.Output, "reported") {
		t.Fatalf("codex exec: %v\n%s\ngateway log:\n%s", res.Err, res.Output, f.gw.log())
	}
	turns := res.Record.Turns()
	if len(turns) == 0 || !strings.Contains(strings.Join(turns[0].Tools, ","), "mcp__herdbridge__bridge_send") {
		t.Fatalf("the worker's model was offered no bridge tool: %v", turns)
	}
	seen := codexResults(t, res.Record)
	if len(seen) != 2 || seen[1].Status != bridge.StatusConfirmed {
		t.Fatalf("the worker's calls as its model saw them: %+v", seen)
	}
	var roster struct { // the default answer: a summary, which names the caller
		Summary struct {
			You struct {
				Name string `json:"name"`
				Role string `json:"role"`
			} `json:"you"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(seen[0].Payload), &roster); err != nil || roster.Summary.You.Name != "cx-1" || roster.Summary.You.Role != "worker" {
		t.Errorf("the worker did not register as cx-1 (%v): %s", err, seen[0].Payload)
	}
	r := lead.MustStatus("bridge_poll", map[string]any{"wait_s": 5}, bridge.StatusDrained) // waits only if the reply is still on its way to the hold
	if len(r.Messages) != 1 || r.Messages[0].FromName != "cx-1" || !strings.Contains(r.Messages[0].Body, "done: 7 files") {
		t.Errorf("the primary got %+v", r.Messages)
	}
}
