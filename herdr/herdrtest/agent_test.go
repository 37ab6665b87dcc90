package herdrtest_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

const (
	pasteOn  = "\x1b[200~"
	pasteOff = "\x1b[201~"
)

func TestAgentPromptSubmitsAfterDelay(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(200*time.Millisecond))
	pane := srv.AddAgent(herdrtest.PaneOptions{Name: "reviewer", Cwd: "/repo"})
	seq0 := srv.StateChangeSeq(pane)

	t0 := time.Now()
	r := mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": "reviewer", "text": "Review the diff"}), "agent_prompted")
	if r.str("agent", "pane_id") != pane || r.str("agent", "agent_status") != "done" {
		t.Fatalf("agent_prompted: %s", r.Raw)
	}
	// Replied at once: the text is typed (bracketed, one write), Enter is not.
	if w := srv.Writes(pane); len(w) != 1 || string(w[0]) != pasteOn+"Review the diff"+pasteOff {
		t.Fatalf("writes right after the reply: %q", w)
	}
	if srv.Composer(pane) != "Review the diff" || len(srv.Submitted(pane)) != 0 {
		t.Fatalf("composer %q, submitted %q", srv.Composer(pane), srv.Submitted(pane))
	}
	eventually(t, 2*time.Second, "Enter", func() bool { return len(srv.Writes(pane)) == 2 })
	if el := time.Since(t0); el < herdrtest.DefaultSubmitDelay {
		t.Fatalf("Enter came after %v, want >= %v", el, herdrtest.DefaultSubmitDelay)
	}
	if w := srv.Writes(pane); string(w[1]) != "\r" {
		t.Fatalf("second write %q, want Enter", w[1])
	}
	if got := srv.Submitted(pane); len(got) != 1 || got[0] != "Review the diff" {
		t.Fatalf("submitted %q", got)
	}
	eventually(t, 2*time.Second, "turn end", func() bool { return srv.Status(pane) == "done" && srv.StateChangeSeq(pane) == seq0+2 })
	if !strings.Contains(srv.Screen(pane), "> Review the diff") {
		t.Fatalf("transcript: %q", srv.Screen(pane))
	}
	noViolations(t, srv)
}

func TestAgentPromptWait(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(50*time.Millisecond), herdrtest.WithTurnDuration(300*time.Millisecond))
	pane := srv.AddAgent(herdrtest.PaneOptions{})
	seq0 := srv.StateChangeSeq(pane)

	// Default until (idle, done, blocked): returns when the turn is over.
	r := mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "one", "wait": map[string]any{"timeout_ms": 10000}}), "agent_prompted")
	if r.str("agent", "agent_status") != "done" || uint64(r.num("agent", "state_change_seq")) != seq0+2 {
		t.Fatalf("reply %s", r.Raw)
	}

	// until working: returns as soon as the agent picked the prompt up.
	r = mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "two", "wait": map[string]any{"until": []string{"working"}, "timeout_ms": 10000}}), "agent_prompted")
	if r.str("agent", "agent_status") != "working" {
		t.Fatalf("reply %s", r.Raw)
	}

	// Prompt while working: no activity gate; the end of the current turn
	// satisfies the wait, the new prompt is queued.
	r = mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "three", "wait": map[string]any{"until": []string{"idle", "done"}, "timeout_ms": 10000}}), "agent_prompted")
	if s := r.str("agent", "agent_status"); s != "done" {
		t.Fatalf("reply %s", r.Raw)
	}
	eventually(t, 2*time.Second, "three submitted", func() bool { return strings.Join(srv.Submitted(pane), "|") == "one|two|three" })

	// Seen panes finish idle, not done.
	srv.SetSeen(pane, true)
	r = mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "four", "wait": map[string]any{}}), "agent_prompted")
	if r.str("agent", "agent_status") != "idle" {
		t.Fatalf("reply %s", r.Raw)
	}
	noViolations(t, srv)
}

func TestAgentPromptRefusals(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	pane := srv.AddAgent(herdrtest.PaneOptions{Name: "a1"})
	shell := srv.AddPane(herdrtest.PaneOptions{})
	custom := srv.AddAgent(herdrtest.PaneOptions{Agent: "my-agent"})
	launching := srv.AddAgent(herdrtest.PaneOptions{Agent: "codex", LaunchPending: true})

	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": "a1", "text": ""}), "empty_agent_prompt")
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": "nobody", "text": "x"}), "agent_not_found")
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": shell, "text": "x"}), "agent_not_found")
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": "claude", "text": "x"}), "agent_not_found") // kind labels are not targets
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": custom, "text": "x"}), "agent_not_ready")
	r := mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": launching, "text": "x"}), "agent_not_ready")
	if !strings.Contains(r.Error.Message, "is not an active named agent") {
		t.Fatalf("message %q", r.Error.Message)
	}

	srv.SetBlocked(pane, true)
	seq := srv.StateChangeSeq(pane)
	r = mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": "a1", "text": "please", "wait": map[string]any{"timeout_ms": 5000}}), "agent_blocked")
	if r.Error.Message != "agent a1 is blocked and requires interactive input" {
		t.Fatalf("message %q", r.Error.Message)
	}
	if len(srv.Writes(pane)) != 0 || len(srv.TypedIntoDialog(pane)) != 0 || srv.StateChangeSeq(pane) != seq {
		t.Fatalf("a refused prompt must write nothing: %q", srv.Writes(pane))
	}
	// pane.send_input has no such guard: text lands in the dialog.
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": pane, "text": "oops", "keys": []string{"enter"}}), "ok")
	if got := srv.TypedIntoDialog(pane); len(got) != 1 || got[0] != "oops" {
		t.Fatalf("TypedIntoDialog = %q", got)
	}
	if srv.Status(pane) != "blocked" || srv.Composer(pane) != "" {
		t.Fatalf("dialog must stay open and the composer empty")
	}
	srv.SetBlocked(pane, false)
	if srv.Status(pane) != "done" {
		t.Fatalf("status after the dialog: %s", srv.Status(pane))
	}
	noViolations(t, srv)
}

func TestAgentPromptBlockedDuringWait(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(20*time.Millisecond), herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{})
	p := start(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "rm -rf build", "wait": map[string]any{"timeout_ms": 10000}})
	eventually(t, 2*time.Second, "working", func() bool { return srv.Status(pane) == "working" })
	p.stillWaiting(t)
	srv.SetBlocked(pane, true) // the agent asks for permission mid-turn
	r := mustOK(t, p.result(t, srv, 3*time.Second), "agent_prompted")
	if r.str("agent", "agent_status") != "blocked" {
		t.Fatalf("reply %s", r.Raw)
	}
	noViolations(t, srv)
}

func TestAgentPromptStalledAtFiveSeconds(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(20*time.Millisecond))
	pane := srv.AddAgent(herdrtest.PaneOptions{})
	srv.SwallowEnters(pane, 1)
	t0 := time.Now()
	r := mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "hello", "wait": map[string]any{"timeout_ms": 60000}}), "agent_prompt_stalled")
	if el := time.Since(t0); el < 5*time.Second || el > 7*time.Second {
		t.Fatalf("stalled after %v, want ~5s", el)
	}
	want := "agent prompt produced no observed state change within 5000 ms; status is done and state_change_seq remained 0"
	if r.Error.Message != want {
		t.Fatalf("message %q", r.Error.Message)
	}
	// The text is still in the composer: one bounded Enter retry submits it.
	if srv.Composer(pane) != "hello" || len(srv.Submitted(pane)) != 0 {
		t.Fatalf("composer %q submitted %q", srv.Composer(pane), srv.Submitted(pane))
	}
	mustOK(t, call(t, srv, "agent.send_keys", map[string]any{"target": pane, "keys": []string{"enter"}}), "ok")
	if got := srv.Submitted(pane); len(got) != 1 || got[0] != "hello" || srv.Status(pane) != "working" {
		t.Fatalf("after retry: submitted %q status %s", got, srv.Status(pane))
	}
	noViolations(t, srv)
}

func TestAgentPromptStallGateVsTimeout(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(10*time.Millisecond), herdrtest.WithStallTimeout(400*time.Millisecond))
	pane := srv.AddAgent(herdrtest.PaneOptions{})
	srv.SwallowEnters(pane, 2)

	// timeout_ms above the gate: agent_prompt_stalled once the gate passes.
	t0 := time.Now()
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "a", "wait": map[string]any{"timeout_ms": 10000}}), "agent_prompt_stalled")
	if el := time.Since(t0); el < 400*time.Millisecond || el > 2*time.Second {
		t.Fatalf("gate took %v", el)
	}
	// timeout_ms within the gate: a plain timeout after timeout_ms.
	t0 = time.Now()
	r := mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "b", "wait": map[string]any{"timeout_ms": 200}}), "timeout")
	if el := time.Since(t0); el < 200*time.Millisecond || el > 2*time.Second {
		t.Fatalf("timeout took %v", el)
	}
	if r.Error.Message != "timed out waiting for agent status" {
		t.Fatalf("message %q", r.Error.Message)
	}
	// Both texts sit in the composer, concatenated.
	if srv.Composer(pane) != "ab" {
		t.Fatalf("composer %q", srv.Composer(pane))
	}

	// Turn longer than timeout_ms: the gate passes, then a plain timeout.
	srv.SetTurnDuration(0)
	srv.SetDraft(pane, "")
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "c", "wait": map[string]any{"timeout_ms": 600}}), "timeout")
	if srv.Status(pane) != "working" {
		t.Fatalf("status %s", srv.Status(pane))
	}
	noViolations(t, srv)
}

func TestSwallowedEnterAndDraft(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(10*time.Millisecond), herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{})

	// pane.send_input: text and Enter in ONE write; the Enter is swallowed.
	srv.SwallowEnters(pane, 1)
	seq := srv.StateChangeSeq(pane)
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": pane, "text": "fix the bug", "keys": []string{"enter"}}), "ok")
	if w := srv.Writes(pane); len(w) != 1 || string(w[0]) != pasteOn+"fix the bug"+pasteOff+"\r" {
		t.Fatalf("writes %q", w)
	}
	if srv.Composer(pane) != "fix the bug" || srv.StateChangeSeq(pane) != seq || srv.Status(pane) != "done" {
		t.Fatalf("swallowed Enter changed something: composer %q", srv.Composer(pane))
	}
	// A client finds its text still on screen…
	r := mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": pane, "source": "visible"}), "pane_read")
	if !strings.HasSuffix(r.str("read", "text"), "> fix the bug") {
		t.Fatalf("visible: %q", r.str("read", "text"))
	}
	// …and re-sends Enter once.
	mustOK(t, call(t, srv, "pane.send_keys", map[string]any{"pane_id": pane, "keys": []string{"Enter"}}), "ok")
	if got := srv.Submitted(pane); len(got) != 1 || got[0] != "fix the bug" || srv.Status(pane) != "working" {
		t.Fatalf("submitted %q status %s", got, srv.Status(pane))
	}
	srv.FinishTurn(pane)

	// A draft already in the composer is submitted together with the prompt.
	srv.SetDraft(pane, "half-typed note ")
	mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "real prompt", "wait": map[string]any{"until": []string{"working"}, "timeout_ms": 5000}}), "agent_prompted")
	if got := srv.Submitted(pane); len(got) != 2 || got[1] != "half-typed note real prompt" {
		t.Fatalf("submitted %q", got)
	}
	noViolations(t, srv)
}

func TestPaneCloseEndsWaits(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithSubmitDelay(10*time.Millisecond), herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{Status: "working"})
	other := srv.AddAgent(herdrtest.PaneOptions{})

	w1 := start(t, srv, "agent.wait", map[string]any{"target": pane, "timeout_ms": 10000})
	w2 := start(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "x", "wait": map[string]any{"timeout_ms": 10000}})
	w3 := start(t, srv, "events.wait", map[string]any{"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": "idle"}, "timeout_ms": 10000})
	w4 := start(t, srv, "agent.wait", map[string]any{"target": other, "until": []string{"working"}, "timeout_ms": 10000})
	time.Sleep(200 * time.Millisecond)
	w1.stillWaiting(t)
	w2.stillWaiting(t)
	w3.stillWaiting(t)

	mustOK(t, call(t, srv, "pane.close", map[string]any{"pane_id": pane}), "ok")
	for _, w := range []*pending{w1, w2} {
		r := mustErr(t, w.result(t, srv, 2*time.Second), "agent_not_running")
		if r.Error.Message != "agent is no longer running in the target pane" {
			t.Fatalf("message %q", r.Error.Message)
		}
	}
	mustErr(t, w3.result(t, srv, 2*time.Second), "pane_not_found")

	// The agent process exiting to the shell also ends waits on it.
	srv.ExitAgent(other)
	mustErr(t, w4.result(t, srv, 2*time.Second), "agent_not_running")
	mustErr(t, call(t, srv, "agent.get", map[string]any{"target": other}), "agent_not_found")
	mustErr(t, call(t, srv, "pane.get", map[string]any{"pane_id": pane}), "pane_not_found")
	noViolations(t, srv)
}

func TestAgentWait(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{Name: "w"})

	// Already matching: immediate.
	r := mustOK(t, call(t, srv, "agent.wait", map[string]any{"target": "w"}), "agent_info")
	if r.str("agent", "agent_status") != "done" || r.str("agent", "name") != "w" {
		t.Fatalf("reply %s", r.Raw)
	}
	// Timeout.
	mustErr(t, call(t, srv, "agent.wait", map[string]any{"target": "w", "until": []string{"working"}, "timeout_ms": 150}), "timeout")
	// Event-driven.
	p := start(t, srv, "agent.wait", map[string]any{"target": "w", "until": []string{"blocked"}, "timeout_ms": 10000})
	time.Sleep(150 * time.Millisecond)
	srv.SetStatus(pane, "working")
	time.Sleep(150 * time.Millisecond)
	p.stillWaiting(t)
	srv.SetBlocked(pane, true)
	r = mustOK(t, p.result(t, srv, 2*time.Second), "agent_info")
	if r.str("agent", "agent_status") != "blocked" {
		t.Fatalf("reply %s", r.Raw)
	}
	mustErr(t, call(t, srv, "agent.wait", map[string]any{"target": "ghost"}), "agent_not_found")
	noViolations(t, srv)
}

func TestEventsWait(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{})
	match := func(status string) map[string]any {
		return map[string]any{"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": status}
	}
	r := mustOK(t, call(t, srv, "events.wait", map[string]any{"match_event": match("done")}), "wait_matched")
	if r.str("event", "event") != "pane_agent_status_changed" || r.str("event", "data", "type") != "pane_agent_status_changed" || r.str("event", "data", "agent") != "claude" {
		t.Fatalf("reply %s", r.Raw)
	}
	p := start(t, srv, "events.wait", map[string]any{"match_event": match("working"), "timeout_ms": 5000})
	time.Sleep(120 * time.Millisecond)
	srv.SetStatus(pane, "working")
	r = mustOK(t, p.result(t, srv, 2*time.Second), "wait_matched")
	if r.str("event", "data", "agent_status") != "working" {
		t.Fatalf("reply %s", r.Raw)
	}
	mustErr(t, call(t, srv, "events.wait", map[string]any{"match_event": match("blocked"), "timeout_ms": 100}), "timeout")
	mustErr(t, call(t, srv, "events.wait", map[string]any{"match_event": map[string]any{"event": "pane_created"}, "timeout_ms": 100}), "unsupported_event_wait_match")
	mustErr(t, call(t, srv, "events.wait", map[string]any{"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": "w9:p9", "agent_status": "idle"}}), "pane_not_found")
	noViolations(t, srv)
}

func TestProtocol16Fallback(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(200*time.Millisecond))
	srv.SetProtocol(16)
	pane := srv.AddAgent(herdrtest.PaneOptions{Name: "old"})

	r := mustOK(t, call(t, srv, "ping", map[string]any{}), "pong")
	if r.num("protocol") != 16 || r.str("version") != "0.7.4" {
		t.Fatalf("pong %s", r.Raw)
	}
	for _, m := range []string{"agent.prompt", "agent.wait", "agent.send_keys"} {
		params := map[string]any{"target": "old", "text": "x", "keys": []string{"enter"}}
		r := roundTrip(t, srv, request("p16", m, params))
		mustErr(t, r, "invalid_request")
		if !strings.Contains(r.Error.Message, "unknown variant `"+m+"`") {
			t.Fatalf("%s: message %q", m, r.Error.Message)
		}
	}
	if len(srv.Writes(pane)) != 0 {
		t.Fatal("a rejected method must not write")
	}

	// The fallback: type and submit in one write, then poll agent.get.
	seq := uint64(mustOK(t, call(t, srv, "agent.get", map[string]any{"target": "old"}), "agent_info").num("agent", "state_change_seq"))
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": pane, "text": "line one\nline two", "keys": []string{"enter"}}), "ok")
	if w := srv.Writes(pane); len(w) != 1 || !bytes.Equal(w[0], []byte(pasteOn+"line one\nline two"+pasteOff+"\r")) {
		t.Fatalf("writes %q", w)
	}
	eventually(t, 3*time.Second, "turn to finish", func() bool {
		r := mustOK(t, call(t, srv, "agent.get", map[string]any{"target": "old"}), "agent_info")
		return uint64(r.num("agent", "state_change_seq")) == seq+2 && r.str("agent", "agent_status") == "done"
	})
	if got := srv.Submitted(pane); len(got) != 1 || got[0] != "line one\nline two" {
		t.Fatalf("submitted %q", got)
	}

	// Protocol 17–19: agent.prompt exists but has no blocked guard.
	srv.SetProtocol(19)
	srv.SetBlocked(pane, true)
	mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": "old", "text": "into the dialog"}), "agent_prompted")
	if got := srv.TypedIntoDialog(pane); len(got) != 1 || got[0] != "into the dialog" {
		t.Fatalf("TypedIntoDialog %q", got)
	}
	noViolations(t, srv)
}

func TestAgentStart(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithStartDelay(150*time.Millisecond))
	shell := srv.AddPane(herdrtest.PaneOptions{Cwd: "/repo"})
	busy := srv.AddPane(herdrtest.PaneOptions{Busy: true})

	r := mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "reviewer", "kind": "claude", "pane_id": shell, "args": []string{"--model", "opus"}, "timeout_ms": 30000}), "agent_started")
	if r.get("agent", "launch_pending") != true || r.str("agent", "agent_status") != "unknown" || r.str("agent", "name") != "reviewer" {
		t.Fatalf("reply %s", r.Raw)
	}
	if argv, _ := r.get("argv").([]any); len(argv) != 3 || argv[0] != "claude" || argv[2] != "opus" {
		t.Fatalf("argv %v", r.get("argv"))
	}
	if w := srv.Writes(shell); len(w) != 1 || string(w[0]) != "claude --model opus\r" {
		t.Fatalf("typed %q", w)
	}
	// Not ready yet.
	mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": "reviewer", "text": "hi"}), "agent_not_ready")
	eventually(t, 2*time.Second, "interactive_ready", func() bool {
		r := mustOK(t, call(t, srv, "agent.get", map[string]any{"target": "reviewer"}), "agent_info")
		return r.get("agent", "interactive_ready") == true && r.get("agent", "launch_pending") == nil && r.str("agent", "agent_status") == "done"
	})
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "reviewer", "kind": "claude", "pane_id": busy}), "agent_name_taken")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "second", "kind": "claude", "pane_id": busy}), "agent_pane_busy")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "third", "kind": "claude", "pane_id": shell}), "agent_pane_busy")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "Bad Name", "kind": "claude", "pane_id": busy}), "invalid_agent_name")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "x", "kind": "vim", "pane_id": busy}), "unsupported_agent_kind")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "x", "kind": "codex", "pane_id": busy, "timeout_ms": 1000}), "invalid_agent_timeout")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "x", "kind": "codex", "pane_id": "w7:p7"}), "agent_pane_not_found")
	srv.SetBusy(busy, false)
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "x", "kind": "cursor", "pane_id": busy}), "agent_started")
	if w := srv.Writes(busy); len(w) != 1 || string(w[0]) != "cursor-agent\r" {
		t.Fatalf("typed %q", w)
	}
	noViolations(t, srv)
}
