package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// codexTools is the prefix Codex gives the bridge's tools.
const codexTools = "mcp__herdbridge__"

// TestClaudePrimaryCodexWorker is the cross-CLI exchange, both
// sides real CLIs on one embedded gateway: a Claude Code primary (`claude
// -p` after `herdbridge setup claude`) and a Codex worker (`codex exec`
// with only the spawn's args, herdr.CodexWorkerArgs). The primary briefs
// the worker with wait_s; the worker drains the brief and asks the primary
// a question mid-turn; the primary's open send returns asked; it answers
// with bridge_send(turn_id) (delivered); the worker's ask returns answered
// with that text; the primary tells it to go ahead with a second brief and
// wait_s; the worker replies with the answer it got, and the primary's
// second send returns replied. Each script decides from what its model saw
// (a result it did not expect ends its turn), so the order of events is
// the fabric's, and every payload either model saw is asserted.
func TestClaudePrimaryCodexWorker(t *testing.T) {
	start := time.Now()
	f := newClaudeFixture(t)
	f.setup(t, "--name", "lead")
	codex := codexCLI(t)
	identity := map[string]string{"HERDBRIDGE_NAME": "cx-1", "HERDBRIDGE_ROLE": "worker", "HERDBRIDGE_STATE_DIR": f.state,
		"HERDBRIDGE_SPAWN_ID": "0b3c0000-0000-4000-8000-0000000000c2"}
	var worker codexRunResult
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		worker = runCodex(t, codexRun{Codex: codex, Herdbridge: f.bin, StateDir: f.state, NoSetup: true,
			Args: herdr.CodexWorkerArgs(f.bin, identity), Prompt: "Work for lead over herdbridge.",
			Script: codexWorkerScript, Timeout: 90 * time.Second})
	}()
	t.Cleanup(func() { <-finished }) // runCodex logs: it must end before the test does
	gatewaytest.Eventually(t, 60*time.Second, "the Codex worker registers", func() bool {
		out, _ := exec.Command(f.bin, "roster", "--json", "--state-dir", f.state).Output()
		return strings.Contains(string(out), `"name":"cx-1"`)
	})
	lead := runClaude(t, claudeRun{Exe: f.exe, Dir: f.proj, Home: f.home, Prompt: "brief cx-1", Script: claudePrimaryScript})
	<-finished
	t.Logf("the exchange took %v from the fixture's start", time.Since(start).Round(time.Millisecond))
	leadSeen := lead.Record.LastResults()
	workerSeen := codexResults(t, worker.Record)
	logSeen(t, "the Claude Code primary", leadSeen)
	for _, s := range workerSeen {
		t.Logf("the Codex worker's model saw for %s:\n%s", s.Tool, s.Raw)
	}
	if lead.Err != nil || worker.Err != nil || !strings.Contains(lead.Stdout, "exchange done") || !strings.Contains(worker.Output, "worker done") {
		t.Errorf("gateway log:\n%s", f.gw.log())
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s\ncodex exec: %v\n%s", lead.Err, lead.Stdout, lead.Stderr, worker.Err, worker.Output)
	}
	checkPrimarySeen(t, leadSeen)
	checkWorkerSeen(t, workerSeen)
	logPayload(t, "claude", "replied", leadSeen[3].Content)
	for _, s := range workerSeen {
		if s.Status == bridge.StatusDrained {
			logPayload(t, "codex", "drained", s.Raw)
		}
	}
}

// claudePrimaryScript is the primary's model: load the bridge's send,
// brief cx-1 and wait; answer the ask it gets by its turnId; brief the go-
// ahead and wait; end when the reply came. Each step follows from the last
// result's status, as a model reads it (Claude Code shows it the JSON of
// structuredContent alone).
func claudePrimaryScript(tr fakemodel.Turn) fakemodel.Step {
	call := func(tool string, args map[string]any) fakemodel.Step {
		return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: claudeTools + tool, Args: args}}}
	}
	if len(tr.Results) == 0 {
		return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: "ToolSearch", Args: map[string]any{"query": "select:" + claudeTools + "bridge_send," + claudeTools + "bridge_poll"}}}}
	}
	last := tr.Results[len(tr.Results)-1]
	if last.Tool == "ToolSearch" {
		return call("bridge_send", map[string]any{"target": "cx-1", "message": "brief one: fix the build", "wait_s": 30})
	}
	var r bridge.Result
	_ = json.Unmarshal([]byte(last.Content), &r)
	switch r.Status {
	case bridge.StatusPending: // the worker is slow: its ask reaches a waiting poll as well
		return call("bridge_poll", map[string]any{"target": "cx-1", "wait_s": 30})
	case bridge.StatusAsked:
		return call("bridge_send", map[string]any{"turn_id": r.TurnID, "message": "main"})
	case bridge.StatusDelivered:
		return call("bridge_send", map[string]any{"target": "cx-1", "message": "brief two: go ahead, reply when done", "wait_s": 30})
	case bridge.StatusReplied:
		return fakemodel.Step{Text: "exchange done"}
	}
	return fakemodel.Step{Text: "unexpected result: " + last.Content}
}

// codexWorkerScript is the worker's model: poll until brief one comes,
// ask lead which branch, poll for the go-ahead, reply with the answer it
// got. Codex shows its model "Wall time…\nOutput:\n" and the JSON of
// structuredContent; the step follows from the last result.
func codexWorkerScript(tr fakemodel.Turn) fakemodel.Step {
	call := func(tool string, args map[string]any) fakemodel.Step {
		return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: codexTools + tool, Args: args}}}
	}
	poll := call("bridge_poll", map[string]any{"wait_s": 30})
	n := len(tr.Results)
	if n == 0 {
		return poll
	}
	last := tr.Results[n-1]
	_, payload, _ := strings.Cut(last.Content, "\nOutput:\n")
	var r bridge.Result
	_ = json.Unmarshal([]byte(payload), &r)
	switch {
	case last.Tool == codexTools+"bridge_send":
		return fakemodel.Step{Text: "worker done"}
	case last.Tool == codexTools+"bridge_ask" && r.Status == bridge.StatusAnswered && len(r.Messages) == 1:
		return poll // the answer is in; the go-ahead comes next
	case strings.Contains(payload, "brief two"):
		return call("bridge_send", map[string]any{"target": "lead", "message": "done on " + workerAnswer(tr.Results)})
	case strings.Contains(payload, "brief one"):
		return call("bridge_ask", map[string]any{"question": "which branch?"})
	case r.Status == bridge.StatusEmpty || r.Status == bridge.StatusPending:
		if n < 6 {
			return poll
		}
	}
	return fakemodel.Step{Text: "unexpected result: " + last.Content}
}

// workerAnswer is the body of the answered ask among the worker's results.
func workerAnswer(seen []fakemodel.Seen) string {
	for _, s := range seen {
		_, payload, _ := strings.Cut(s.Content, "\nOutput:\n")
		var r bridge.Result
		if s.Tool == codexTools+"bridge_ask" && json.Unmarshal([]byte(payload), &r) == nil && len(r.Messages) == 1 {
			return r.Messages[0].Body
		}
	}
	return "(no answer)"
}

func logSeen(t *testing.T, who string, seen []fakemodel.Seen) {
	t.Helper()
	for i, s := range seen {
		t.Logf("%s's model saw, result %d (%s, error %v):\n%s", who, i, s.Tool, s.IsError, s.Content)
	}
}

// checkPrimarySeen: ToolSearch, then asked (the question, from cx-1, a
// turnId and a next naming it), delivered, replied (the worker's words,
// corr the second brief).
func checkPrimarySeen(t *testing.T, seen []fakemodel.Seen) {
	t.Helper()
	if len(seen) != 4 {
		t.Fatalf("the primary's model saw %d results, want 4 (ToolSearch, asked, delivered, replied)", len(seen))
	}
	var asked, answer, replied bridge.Result
	for i, r := range []*bridge.Result{&asked, &answer, &replied} {
		if err := json.Unmarshal([]byte(seen[i+1].Content), r); err != nil || seen[i+1].IsError || seen[i+1].Tool != claudeTools+"bridge_send" {
			t.Fatalf("result %d (%s, error %v) is not a bridge_send result: %s", i+1, seen[i+1].Tool, seen[i+1].IsError, seen[i+1].Content)
		}
	}
	if asked.Status != bridge.StatusAsked || asked.TurnID == "" || len(asked.Messages) != 1 || asked.Messages[0].Body != "which branch?" ||
		asked.Messages[0].FromName != "cx-1" || asked.Messages[0].Kind != bridge.KindAsk || !strings.Contains(asked.Next, "turn_id="+asked.TurnID) {
		t.Errorf("the brief's wait: %s, want asked with the question from cx-1 and its turnId", seen[1].Content)
	}
	if answer.Status != bridge.StatusDelivered || answer.TurnID != asked.TurnID || answer.Next == "" {
		t.Errorf("the answer: %s, want delivered on turn %s", seen[2].Content, asked.TurnID)
	}
	if replied.Status != bridge.StatusReplied || len(replied.Messages) != 1 || replied.Messages[0].Body != "done on main" ||
		replied.Messages[0].FromName != "cx-1" || replied.Messages[0].Corr != replied.MsgID || replied.Next == "" {
		t.Errorf("the go-ahead's wait: %s, want replied with \"done on main\" from cx-1, corr the brief", seen[3].Content)
	}
}

// checkWorkerSeen: drained (brief one from lead), answered ("main", on
// the ask's turn), drained (brief two), confirmed (the reply), with
// nothing refused for approval.
func checkWorkerSeen(t *testing.T, seen []codexSeen) {
	t.Helper()
	var polls []codexSeen
	for _, s := range seen {
		if strings.Contains(s.Raw, "requires approval") || s.Payload == "" {
			t.Errorf("the worker's model saw no bridge result for %s: %s", s.Tool, s.Raw)
		}
		if s.Tool == codexTools+"bridge_poll" && (s.Status == bridge.StatusEmpty || s.Status == bridge.StatusPending) {
			continue // polls before the brief came: how many is timing
		}
		polls = append(polls, s)
	}
	want := []struct{ tool, status, body string }{
		{"bridge_poll", bridge.StatusDrained, "brief one: fix the build"},
		{"bridge_ask", bridge.StatusAnswered, "main"},
		{"bridge_poll", bridge.StatusDrained, "brief two: go ahead, reply when done"},
		{"bridge_send", bridge.StatusConfirmed, ""},
	}
	if len(polls) != len(want) {
		t.Fatalf("the worker's model saw %d results past its empty polls, want %d: %+v", len(polls), len(want), polls)
	}
	for i, w := range want {
		var r bridge.Result
		err := json.Unmarshal([]byte(polls[i].Payload), &r)
		if err != nil || polls[i].Tool != codexTools+w.tool || r.Status != w.status || r.Next == "" {
			t.Errorf("worker result %d: %s %s, want %s %s with a next", i, polls[i].Tool, polls[i].Payload, w.tool, w.status)
			continue
		}
		if w.body != "" && (len(r.Messages) != 1 || r.Messages[0].Body != w.body || r.Messages[0].FromName != "lead") {
			t.Errorf("worker result %d: %s, want one message %q from lead", i, polls[i].Payload, w.body)
		}
	}
}
