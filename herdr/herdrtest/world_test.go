package herdrtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

func TestSubscriptionReplaysBufferedEvents(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	p1 := srv.AddPane(herdrtest.PaneOptions{})
	p2 := srv.AddAgent(herdrtest.PaneOptions{})
	mustOK(t, call(t, srv, "pane.close", map[string]any{"pane_id": p1}), "ok")

	s, ack := subscribe(t, srv,
		map[string]any{"type": "pane.created"},
		map[string]any{"type": "pane.closed"},
		map[string]any{"type": "pane.agent_status_changed", "pane_id": p2, "agent_status": "done"},
	)
	defer s.c.Close()
	mustOK(t, ack, "subscription_started")

	// Old events come first: a fresh subscriber must de-duplicate.
	got := map[string]int{}
	var statusLine string
	for range 4 { // 2 old pane_created, 1 old pane_closed, 1 immediate status
		name, data, line := s.event(t, srv, 2*time.Second)
		got[name]++
		switch name {
		case "pane_created", "pane_closed":
			if data["type"] != name {
				t.Fatalf("topology event without data.type: %s", line)
			}
		case "pane.agent_status_changed":
			statusLine = line
			if _, ok := data["type"]; ok {
				t.Fatalf("pane-scoped event must not carry data.type: %s", line)
			}
		}
	}
	if got["pane_created"] != 2 || got["pane_closed"] != 1 || got["pane.agent_status_changed"] != 1 {
		t.Fatalf("replayed %v", got)
	}
	if !strings.Contains(statusLine, `"agent_status":"done"`) {
		t.Fatalf("immediate status event %s", statusLine)
	}
	s.quiet(t, 250*time.Millisecond)

	// New events follow, one per subscription per 100 ms tick.
	p3 := srv.AddPane(herdrtest.PaneOptions{})
	name, data, _ := s.event(t, srv, 2*time.Second)
	if name != "pane_created" || data["pane"].(map[string]any)["pane_id"] != p3 {
		t.Fatalf("got %s %v", name, data)
	}
	srv.SetStatus(p2, "working") // filtered out: the subscription wants done
	srv.SetStatus(p2, "done")
	name, data, _ = s.event(t, srv, 2*time.Second)
	if name != "pane.agent_status_changed" || data["agent_status"] != "done" || data["pane_id"] != p2 {
		t.Fatalf("got %s %v", name, data)
	}

	// Closing the connection ends the stream (and counts as an abort).
	_ = s.c.CloseWrite()
	eventually(t, 2*time.Second, "subscription end", func() bool { return srv.Aborted() == 1 })
	noViolations(t, srv)
}

func TestSubscriptionKinds(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	shell := srv.AddPane(herdrtest.PaneOptions{})

	s, ack := subscribe(t, srv, map[string]any{"type": "pane.agent_status_changed", "pane_id": "w9:p9"})
	mustErr(t, ack, "pane_not_found")
	s.c.Close()

	s, ack = subscribe(t, srv,
		map[string]any{"type": "pane.output_matched", "pane_id": shell, "source": "recent", "lines": 40, "match": map[string]any{"type": "regex", "value": `\d+ passed`}},
		map[string]any{"type": "pane.exited"},
		map[string]any{"type": "layout.updated"},
	)
	defer s.c.Close()
	mustOK(t, ack, "subscription_started")
	name, _, _ := s.event(t, srv, 2*time.Second) // the old layout_updated from AddPane
	if name != "layout_updated" {
		t.Fatalf("got %s", name)
	}
	srv.AppendOutput(shell, "running…", "12 passed")
	name, data, _ := s.event(t, srv, 2*time.Second)
	if name != "pane.output_matched" || data["matched_line"] != "12 passed" {
		t.Fatalf("got %s %v", name, data)
	}
	srv.ExitPane(shell)
	if name, data, _ := s.event(t, srv, 2*time.Second); name != "pane_exited" || data["pane_id"] != shell {
		t.Fatalf("got %s %v", name, data)
	}
	noViolations(t, srv)
}

func TestShellInputAndReads(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	sh := srv.AddPane(herdrtest.PaneOptions{Cwd: "/repo"})

	// No bracketed paste: each \n runs a separate command; one write.
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": sh, "text": "echo alpha\necho beta", "keys": []string{"enter"}}), "ok")
	if w := srv.Writes(sh); len(w) != 1 || string(w[0]) != "echo alpha\necho beta\r" {
		t.Fatalf("writes %q", w)
	}
	r := mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": sh, "source": "recent_unwrapped", "lines": 120}), "pane_read")
	if got := r.str("read", "text"); got != "$ echo alpha\nalpha\n$ echo beta\nbeta\n$ " {
		t.Fatalf("read %q", got)
	}
	if r.num("read", "revision") != 0 || r.get("read", "truncated") != false || r.str("read", "source") != "recent_unwrapped" {
		t.Fatalf("read %s", r.Raw)
	}
	// With bracketed paste the newline stays literal.
	srv.SetBracketedPaste(sh, true)
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": sh, "text": "a\nb"}), "ok")
	if w := srv.Writes(sh); string(w[len(w)-1]) != pasteOn+"a\nb"+pasteOff {
		t.Fatalf("writes %q", w)
	}
	mustOK(t, call(t, srv, "pane.send_keys", map[string]any{"pane_id": sh, "keys": []string{"ctrl+u"}}), "ok")

	// send_text is raw; send_keys writes each key separately.
	mustOK(t, call(t, srv, "pane.send_text", map[string]any{"pane_id": sh, "text": "echo gamma"}), "ok")
	mustOK(t, call(t, srv, "pane.send_keys", map[string]any{"pane_id": sh, "keys": []string{"left", "right", "C-e", "Enter"}}), "ok")
	w := srv.Writes(sh)
	if got := fmt.Sprintf("%q", w[len(w)-5:]); got != `["echo gamma" "\x1b[D" "\x1b[C" "\x05" "\r"]` {
		t.Fatalf("writes %s", got)
	}
	mustErr(t, call(t, srv, "pane.send_keys", map[string]any{"pane_id": sh, "keys": []string{"enter", "pagedown"}}), "invalid_key")
	if len(srv.Writes(sh)) != len(w) {
		t.Fatal("keys are validated before any is written")
	}

	// wait_for_output: the echo of the command line itself matches too.
	r = mustOK(t, call(t, srv, "pane.wait_for_output", map[string]any{"pane_id": sh, "source": "recent", "match": map[string]any{"type": "substring", "value": "gamma"}, "timeout_ms": 1000}), "output_matched")
	if r.str("matched_line") != "$ echo gamma" {
		t.Fatalf("matched %s", r.Raw)
	}
	p := start(t, srv, "pane.wait_for_output", map[string]any{"pane_id": sh, "source": "visible", "match": map[string]any{"type": "regex", "value": "^delta$"}, "timeout_ms": 3000})
	time.Sleep(150 * time.Millisecond)
	p.stillWaiting(t)
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": sh, "text": "echo delta", "keys": []string{"enter"}}), "ok")
	if r := mustOK(t, p.result(t, srv, 2*time.Second), "output_matched"); r.str("matched_line") != "delta" {
		t.Fatalf("matched %s", r.Raw)
	}
	mustErr(t, call(t, srv, "pane.wait_for_output", map[string]any{"pane_id": sh, "source": "recent", "match": map[string]any{"type": "substring", "value": "never"}, "timeout_ms": 150}), "timeout")
	mustErr(t, call(t, srv, "pane.wait_for_output", map[string]any{"pane_id": sh, "source": "recent", "match": map[string]any{"type": "regex", "value": "("}}), "invalid_regex")

	// lines: capped at 1000, recent defaults to 80, truncated reported.
	for i := range 1100 {
		srv.AppendOutput(sh, fmt.Sprintf("row %d", i))
	}
	r = mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": sh, "source": "recent", "lines": 5000}), "pane_read")
	if n := strings.Count(r.str("read", "text"), "\n") + 1; n != 1000 || r.get("read", "truncated") != true {
		t.Fatalf("lines %d truncated %v", n, r.get("read", "truncated"))
	}
	r = mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": sh, "source": "recent"}), "pane_read")
	if n := strings.Count(r.str("read", "text"), "\n") + 1; n != 80 {
		t.Fatalf("default lines %d", n)
	}
	r = mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": sh, "source": "visible"}), "pane_read")
	if n := strings.Count(r.str("read", "text"), "\n") + 1; n != 40 {
		t.Fatalf("visible rows %d", n)
	}
	mustErr(t, call(t, srv, "pane.read", map[string]any{"pane_id": "w1:pZ", "source": "visible"}), "pane_not_found")
	noViolations(t, srv)
}

// TestMethodTour calls every simulated method once and checks that each
// reply and event validates (the fake checks too and would fail the test).
func TestMethodTour(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(50*time.Millisecond), herdrtest.WithSubmitDelay(10*time.Millisecond), herdrtest.WithStartDelay(20*time.Millisecond))
	root := srv.AddPane(herdrtest.PaneOptions{Cwd: "/repo", Focus: true})
	agent := srv.AddAgent(herdrtest.PaneOptions{Name: "rev", Cwd: "/repo"})

	ws := mustOK(t, call(t, srv, "workspace.create", map[string]any{"cwd": "/repo", "label": "api", "focus": false, "env": map[string]string{"ROLE": "worker"}}), "workspace_created")
	wsID := ws.str("workspace", "workspace_id")
	if wsID == "" || ws.str("root_pane", "pane_id") == "" || ws.str("tab", "tab_id") == "" {
		t.Fatalf("workspace_created %s", ws.Raw)
	}
	mustErr(t, call(t, srv, "workspace.create", map[string]any{"env": map[string]string{"A=B": "x"}}), "invalid_env")
	tab := mustOK(t, call(t, srv, "tab.create", map[string]any{"workspace_id": wsID, "label": "worker"}), "tab_created")
	split := mustOK(t, call(t, srv, "pane.split", map[string]any{"target_pane_id": root, "direction": "right", "ratio": 0.5}), "pane_info")
	newPane := split.str("pane", "pane_id")
	if split.str("pane", "agent_status") != "unknown" || split.get("pane", "focused") != false || split.str("pane", "cwd") != "/repo" {
		t.Fatalf("split %s", split.Raw)
	}
	mustOK(t, call(t, srv, "pane.list", map[string]any{}), "pane_list")
	if r := mustOK(t, call(t, srv, "pane.list", map[string]any{"workspace_id": wsID}), "pane_list"); len(r.get("panes").([]any)) != 2 {
		t.Fatalf("pane.list %s", r.Raw)
	}
	mustOK(t, call(t, srv, "pane.get", map[string]any{"pane_id": agent}), "pane_info")
	if r := mustOK(t, call(t, srv, "pane.current", map[string]any{"caller_pane_id": agent}), "pane_current"); r.str("pane", "pane_id") != agent {
		t.Fatalf("pane.current %s", r.Raw)
	}
	if r := mustOK(t, call(t, srv, "pane.current", map[string]any{}), "pane_current"); r.str("pane", "pane_id") != root {
		t.Fatalf("focused pane.current %s", r.Raw)
	}
	mustOK(t, call(t, srv, "pane.process_info", map[string]any{"pane_id": agent}), "pane_process_info")
	mustOK(t, call(t, srv, "agent.list", map[string]any{}), "agent_list")
	r := mustOK(t, call(t, srv, "agent.get", map[string]any{"target": "rev"}), "agent_info")
	if r.str("agent", "pane_id") != agent || r.str("agent", "agent") != "claude" {
		t.Fatalf("agent.get %s", r.Raw)
	}
	mustOK(t, call(t, srv, "agent.send_keys", map[string]any{"target": "rev", "keys": []string{"esc"}}), "ok")
	mustOK(t, call(t, srv, "agent.read", map[string]any{"target": "rev", "source": "detection"}), "pane_read")
	mustOK(t, call(t, srv, "agent.rename", map[string]any{"target": "rev", "name": "reviewer"}), "agent_info")
	mustOK(t, call(t, srv, "agent.focus", map[string]any{"target": "reviewer"}), "agent_info")
	if srv.Status(agent) != "idle" {
		t.Fatalf("focus should mark the agent seen: %s", srv.Status(agent))
	}
	mustOK(t, call(t, srv, "pane.focus", map[string]any{"pane_id": root}), "pane_info")
	mustOK(t, call(t, srv, "pane.rename", map[string]any{"pane_id": root, "label": "main"}), "pane_info")
	mustOK(t, call(t, srv, "workspace.list", map[string]any{}), "workspace_list")
	mustOK(t, call(t, srv, "workspace.get", map[string]any{"workspace_id": wsID}), "workspace_info")
	mustOK(t, call(t, srv, "tab.list", map[string]any{}), "tab_list")
	mustOK(t, call(t, srv, "tab.get", map[string]any{"tab_id": tab.str("tab", "tab_id")}), "tab_info")
	mustOK(t, call(t, srv, "session.snapshot", map[string]any{}), "session_snapshot")
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "coder", "kind": "codex", "pane_id": newPane}), "agent_started")
	eventually(t, 2*time.Second, "coder ready", func() bool { return !srv.Pane(newPane).LaunchPending })
	mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": "coder", "text": "go", "wait": map[string]any{"until": []string{"working", "blocked", "idle", "done"}, "timeout_ms": 15000}}), "agent_prompted")
	mustOK(t, call(t, srv, "agent.wait", map[string]any{"target": "coder", "timeout_ms": 5000}), "agent_info")

	// A custom agent reporting its own state.
	mustOK(t, call(t, srv, "pane.report_agent", map[string]any{"pane_id": root, "source": "custom:my-agent", "agent": "my-agent", "state": "working", "message": "building", "seq": 1}), "ok")
	r = mustOK(t, call(t, srv, "agent.get", map[string]any{"target": root}), "agent_info")
	if r.str("agent", "agent") != "my-agent" || r.str("agent", "agent_status") != "working" || r.get("agent", "screen_detection_skipped") != true {
		t.Fatalf("reported agent %s", r.Raw)
	}
	mustOK(t, call(t, srv, "pane.report_agent", map[string]any{"pane_id": root, "source": "custom:my-agent", "agent": "my-agent", "state": "idle", "seq": 1}), "ok") // stale seq: ignored
	if srv.Status(root) != "working" {
		t.Fatalf("stale report applied: %s", srv.Status(root))
	}
	mustErr(t, call(t, srv, "pane.report_agent", map[string]any{"pane_id": root, "source": "bad source!", "agent": "x", "state": "idle"}), "invalid_params")
	mustOK(t, call(t, srv, "pane.release_agent", map[string]any{"pane_id": root, "source": "custom:my-agent", "agent": "my-agent"}), "ok")
	mustErr(t, call(t, srv, "agent.get", map[string]any{"target": root}), "agent_not_found")

	mustOK(t, call(t, srv, "pane.close", map[string]any{"pane_id": newPane}), "ok")
	mustErr(t, call(t, srv, "pane.close", map[string]any{"pane_id": newPane}), "pane_not_found")
	mustErr(t, call(t, srv, "tab.create", map[string]any{"workspace_id": "wZ"}), "workspace_not_found")
	mustErr(t, call(t, srv, "pane.split", map[string]any{"target_pane_id": root, "direction": "down", "ratio": 1.5}), "invalid_params")
	mustErr(t, call(t, srv, "pane.layout", map[string]any{}), "internal_error") // not simulated

	// Every event in the ring validates against schemas.event.
	for _, l := range srv.Events() {
		if err := srv.Validator().ValidateEvent([]byte(l)); err != nil {
			t.Errorf("ring event: %v\n%s", err, l)
		}
	}
	if len(srv.Sent()) == 0 || len(srv.Requests()) == 0 {
		t.Fatal("nothing recorded")
	}
	noViolations(t, srv)
}

func TestEmptyWorld(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	mustErr(t, call(t, srv, "pane.current", map[string]any{}), "no_active_pane")
	mustErr(t, call(t, srv, "tab.create", map[string]any{}), "no_active_workspace")
	mustErr(t, call(t, srv, "pane.split", map[string]any{"direction": "right"}), "no_active_pane")
	r := mustOK(t, call(t, srv, "workspace.create", map[string]any{}), "workspace_created")
	if r.str("workspace", "workspace_id") != "w1" || r.str("root_pane", "pane_id") != "w1:p1" || r.str("tab", "tab_id") != "w1:t1" {
		t.Fatalf("ids %s", r.Raw)
	}
	mustOK(t, call(t, srv, "pane.current", map[string]any{}), "pane_current")
	if r := mustOK(t, call(t, srv, "agent.list", map[string]any{}), "agent_list"); len(r.get("agents").([]any)) != 0 {
		t.Fatalf("agents %s", r.Raw)
	}
	noViolations(t, srv)
}

func TestEventRingKeeps512(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	first := srv.AddPane(herdrtest.PaneOptions{})
	for range 130 { // 4 events each: workspace_created, tab_created, pane_created, layout_updated
		srv.AddPane(herdrtest.PaneOptions{NewWorkspace: true})
	}
	ev := srv.Events()
	if len(ev) != 512 {
		t.Fatalf("ring holds %d events, want 512", len(ev))
	}
	if strings.Contains(strings.Join(ev, "\n"), `"pane_id":"`+first+`"`) {
		t.Fatal("the oldest events should have been dropped")
	}
	noViolations(t, srv)
}
