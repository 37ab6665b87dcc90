package herdrtest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// eventKinds lists the event names of the ring lines from index from on.
func eventKinds(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var e struct {
			Event string `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("ring line %q: %v", l, err)
		}
		out = append(out, e.Event)
	}
	return out
}

func TestLayoutApplyCommandPane(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithStartDelay(150*time.Millisecond))
	srv.AddPane(herdrtest.PaneOptions{})
	before := len(srv.Events())

	r := mustOK(t, call(t, srv, "layout.apply", map[string]any{
		"workspace_id": "w1", "tab_label": "job", "focus": false,
		"root": map[string]any{"type": "pane", "label": "job", "cwd": "/repo",
			"command": []string{"claude", "--model", "opus"}, "env": map[string]string{"ROLE": "worker"}},
	}), "layout_apply")
	pane := r.str("layout", "root", "pane_id")
	if pane == "" || r.str("layout", "focused_pane_id") != pane || r.str("layout", "workspace_id") != "w1" ||
		r.str("layout", "root", "type") != "pane" || r.str("layout", "root", "label") != "job" ||
		r.str("layout", "root", "cwd") != "/repo" || r.get("layout", "zoomed") != false {
		t.Fatalf("layout %s", r.Raw)
	}
	if cmd, _ := r.get("layout", "root", "command").([]any); len(cmd) != 3 || cmd[0] != "claude" {
		t.Fatalf("command not echoed: %s", r.Raw)
	}
	if r.get("layout", "root", "env") != nil {
		t.Fatalf("env echoed (herdr skips it): %s", r.Raw)
	}
	tabID := r.str("layout", "tab_id")
	if tr := mustOK(t, call(t, srv, "tab.get", map[string]any{"tab_id": tabID}), "tab_info"); tr.str("tab", "label") != "job" {
		t.Fatalf("tab %s", tr.Raw)
	}
	if got := eventKinds(t, srv.Events()[before:]); !slices.Equal(got, []string{"tab_created", "pane_created", "layout_updated"}) {
		t.Fatalf("events %v", got)
	}
	st := srv.Pane(pane)
	if !slices.Equal(st.Command, []string{"claude", "--model", "opus"}) || st.Env["ROLE"] != "worker" || st.Label != "job" || st.Cwd != "/repo" {
		t.Fatalf("pane state %+v", st)
	}

	// claude is an agent herdr recognises: detected after the start delay,
	// then done (unseen), never launch_pending or interactive_ready.
	mustErr(t, call(t, srv, "agent.get", map[string]any{"target": pane}), "agent_not_found")
	eventually(t, 3*time.Second, "agent detected", func() bool { return srv.Status(pane) == "done" })
	a := mustOK(t, call(t, srv, "agent.get", map[string]any{"target": pane}), "agent_info")
	if a.str("agent", "agent") != "claude" || a.get("agent", "launch_pending") != nil || a.get("agent", "interactive_ready") != nil {
		t.Fatalf("agent %s", a.Raw)
	}
	if ev := strings.Join(srv.Events(), "\n"); !strings.Contains(ev, `"pane_agent_detected","pane_id":"`+pane) {
		t.Fatalf("no pane_agent_detected for %s", pane)
	}
	mustOK(t, call(t, srv, "agent.prompt", map[string]any{"target": pane, "text": "hello"}), "agent_prompted")
	eventually(t, 3*time.Second, "turn", func() bool { return len(srv.Submitted(pane)) == 1 })
	// No shell in the pane: agent.start refuses it.
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "x", "kind": "claude", "pane_id": pane}), "agent_pane_busy")
	pi := mustOK(t, call(t, srv, "pane.process_info", map[string]any{"pane_id": pane}), "pane_process_info")
	if procs, _ := pi.get("process_info", "foreground_processes").([]any); len(procs) != 1 || procs[0].(map[string]any)["name"] != "claude" {
		t.Fatalf("process info %s", pi.Raw)
	}

	// The agent is the pane's process: when it exits, the pane goes.
	before = len(srv.Events())
	srv.ExitAgent(pane)
	if !srv.Pane(pane).Closed {
		t.Fatal("pane outlived its command")
	}
	if got := eventKinds(t, srv.Events()[before:]); !slices.Equal(got, []string{"pane_exited", "tab_closed"}) {
		t.Fatalf("events %v", got)
	}
	noViolations(t, srv)
}

func TestLayoutApplyCustomCommandAndAgentHint(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithStartDelay(50*time.Millisecond))
	srv.AddPane(herdrtest.PaneOptions{})
	apply := func(root map[string]any) string {
		t.Helper()
		r := mustOK(t, call(t, srv, "layout.apply", map[string]any{"root": root}), "layout_apply")
		return r.str("layout", "root", "pane_id")
	}
	custom := apply(map[string]any{"type": "pane", "command": []string{"/opt/bin/my-agent", "--flag"}})
	hinted := apply(map[string]any{"type": "pane", "command": []string{"sandbox-wrapper"}, "env": map[string]string{"HERDR_AGENT": "codex"}})
	unknownHint := apply(map[string]any{"type": "pane", "command": []string{"other"}, "env": map[string]string{"HERDR_AGENT": "my-agent"}})
	byPath := apply(map[string]any{"type": "pane", "command": []string{"/usr/local/bin/codex"}})

	eventually(t, 3*time.Second, "hinted agent", func() bool { return srv.Status(hinted) == "done" && srv.Status(byPath) == "done" })
	if a := srv.Pane(hinted); a.Agent != "codex" {
		t.Fatalf("hinted %+v", a)
	}
	time.Sleep(150 * time.Millisecond) // past the start delay: still nothing detected
	for _, p := range []string{custom, unknownHint} {
		if st := srv.Pane(p); st.Agent != "" || st.Status != "unknown" {
			t.Fatalf("custom process %s detected as %+v", p, st)
		}
		mustErr(t, call(t, srv, "agent.get", map[string]any{"target": p}), "agent_not_found")
	}
	// Typed lines are echoed, not run by a shell.
	mustOK(t, call(t, srv, "pane.send_input", map[string]any{"pane_id": custom, "text": "echo hi", "keys": []string{"enter"}}), "ok")
	if scr := srv.Screen(custom); strings.Contains(scr, "$ ") || !strings.Contains(scr, "echo hi") {
		t.Fatalf("screen %q", scr)
	}
	// A custom agent reports itself.
	mustOK(t, call(t, srv, "pane.report_agent", map[string]any{"pane_id": custom, "source": "custom:my-agent", "agent": "my-agent", "state": "idle"}), "ok")
	if st := srv.Pane(custom); st.Agent != "my-agent" || st.Status != "done" {
		t.Fatalf("reported %+v", st)
	}
	srv.ExitPane(unknownHint)
	noViolations(t, srv)
}

func TestLayoutApplySplitAndReplace(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	srv.AddPane(herdrtest.PaneOptions{})
	r := mustOK(t, call(t, srv, "tab.create", map[string]any{"label": "old"}), "tab_created")
	oldTab, oldPane := r.str("tab", "tab_id"), r.str("root_pane", "pane_id")
	before := len(srv.Events())

	r = mustOK(t, call(t, srv, "layout.apply", map[string]any{
		"tab_id": oldTab,
		"root": map[string]any{"type": "split", "direction": "right", "ratio": 0.7,
			"first": map[string]any{"type": "pane", "label": "editor", "cwd": "/src"},
			"second": map[string]any{"type": "split", "direction": "down", "ratio": 0.5,
				"first":  map[string]any{"type": "pane", "label": "tests", "command": []string{"make", "test"}},
				"second": map[string]any{"type": "pane", "cwd": "/logs", "command": []string{"tail", "-f", "x.log"}}}},
	}), "layout_apply")
	if r.str("layout", "root", "type") != "split" || r.num("layout", "root", "ratio") != 0.7 || r.str("layout", "root", "direction") != "right" {
		t.Fatalf("root %s", r.Raw)
	}
	editor := r.str("layout", "root", "first", "pane_id")
	tests := r.str("layout", "root", "second", "first", "pane_id")
	logs := r.str("layout", "root", "second", "second", "pane_id")
	if editor == "" || tests == "" || logs == "" || r.str("layout", "focused_pane_id") != editor {
		t.Fatalf("panes %s", r.Raw)
	}
	if r.str("layout", "root", "second", "first", "cwd") != "/src" || r.str("layout", "root", "second", "second", "cwd") != "/logs" {
		t.Fatalf("cwd inheritance %s", r.Raw)
	}
	if r.str("layout", "root", "first", "label") != "editor" || r.get("layout", "root", "first", "command") != nil {
		t.Fatalf("shell leaf %s", r.Raw)
	}
	// The replaced tab closed, its label carried over.
	if !srv.Pane(oldPane).Closed {
		t.Fatal("replaced tab's pane still open")
	}
	mustErr(t, call(t, srv, "tab.get", map[string]any{"tab_id": oldTab}), "tab_not_found")
	newTab := r.str("layout", "tab_id")
	if tr := mustOK(t, call(t, srv, "tab.get", map[string]any{"tab_id": newTab}), "tab_info"); tr.str("tab", "label") != "old" || tr.num("tab", "pane_count") != 3 {
		t.Fatalf("new tab %s", tr.Raw)
	}
	want := []string{"pane_closed", "tab_closed", "tab_created", "pane_created", "pane_created", "pane_created", "layout_updated"}
	if got := eventKinds(t, srv.Events()[before:]); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// The shell leaf takes agents; the command leaves do not.
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "ed", "kind": "claude", "pane_id": editor}), "agent_started")
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "tt", "kind": "claude", "pane_id": tests}), "agent_pane_busy")
	noViolations(t, srv)
}

func TestLayoutApplyErrors(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	pane := map[string]any{"type": "pane", "command": []string{"x"}}
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"root": pane}), "workspace_not_found") // no active workspace
	srv.AddPane(herdrtest.PaneOptions{})
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"workspace_id": "wZ", "root": pane}), "workspace_not_found")
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"tab_id": "w1:tZ", "root": pane}), "tab_not_found")
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"tab_id": "w1:t1", "workspace_id": "w1", "root": pane}), "invalid_target")
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"root": map[string]any{"type": "pane", "command": []string{}}}), "invalid_layout")
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"root": map[string]any{"type": "pane", "env": map[string]string{"A=B": "c"}}}), "invalid_layout")
	deep := map[string]any{"type": "pane"}
	for range 16 {
		deep = map[string]any{"type": "split", "direction": "down", "ratio": 0.5, "first": deep, "second": map[string]any{"type": "pane"}}
	}
	mustErr(t, call(t, srv, "layout.apply", map[string]any{"root": deep}), "invalid_layout")
	if n := len(srv.PaneIDs()); n != 1 {
		t.Fatalf("a refused layout created panes: %d", n)
	}
	noViolations(t, srv)
}

func TestShellStartupBusy(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithShellStartup(300*time.Millisecond))
	srv.AddPane(herdrtest.PaneOptions{}) // AddPane shells are ready at once
	r := mustOK(t, call(t, srv, "tab.create", map[string]any{"env": map[string]string{"ROLE": "w"}}), "tab_created")
	pane := r.str("root_pane", "pane_id")
	if srv.Pane(pane).Env["ROLE"] != "w" {
		t.Fatalf("env not recorded: %+v", srv.Pane(pane))
	}
	mustErr(t, call(t, srv, "agent.start", map[string]any{"name": "a", "kind": "claude", "pane_id": pane}), "agent_pane_busy")
	time.Sleep(400 * time.Millisecond)
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "a", "kind": "claude", "pane_id": pane}), "agent_started")
	srv.SetShellStartup(0)
	r = mustOK(t, call(t, srv, "tab.create", map[string]any{}), "tab_created")
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "b", "kind": "claude", "pane_id": r.str("root_pane", "pane_id")}), "agent_started")
	noViolations(t, srv)
}

func TestSocketPathAndRawEvents(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "hrp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "herdr.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // a stale file: removed
		t.Fatal(err)
	}
	srv, err := herdrtest.Start(herdrtest.WithSocketPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if srv.SocketPath() != path {
		t.Fatalf("socket %s", srv.SocketPath())
	}
	if _, err := herdrtest.Start(herdrtest.WithSocketPath(path)); err == nil {
		t.Fatal("a second server started on a live path")
	}
	mustOK(t, call(t, srv, "ping", map[string]any{}), "pong")

	s, ack := subscribe(t, srv, map[string]any{"type": "pane.closed"})
	mustOK(t, ack, "subscription_started")
	srv.SendRawEvent([]byte(`{"event":`))
	if l := s.next(t, 2*time.Second); l != `{"event":` {
		t.Fatalf("raw line %q", l)
	}
	s.c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the caller's directory went: %v", err)
	}
	if v := srv.Violations(); len(v) != 0 {
		t.Fatal(v)
	}
}

func TestTrustDialog(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithStartDelay(30*time.Millisecond))
	shell := srv.AddPane(herdrtest.PaneOptions{})
	srv.SetTrustDialog(true)
	mustOK(t, call(t, srv, "agent.start", map[string]any{"name": "a", "kind": "claude", "pane_id": shell}), "agent_started")
	r := mustOK(t, call(t, srv, "layout.apply", map[string]any{"root": map[string]any{"type": "pane", "command": []string{"codex"}}}), "layout_apply")
	cmd := r.str("layout", "root", "pane_id")
	for _, p := range []string{shell, cmd} {
		eventually(t, 2*time.Second, "dialog", func() bool { return srv.Status(p) == "blocked" })
		mustErr(t, call(t, srv, "agent.prompt", map[string]any{"target": p, "text": "hi"}), "agent_blocked")
		srv.SetBlocked(p, false)
		if st := srv.Status(p); st != "done" {
			t.Fatalf("after the dialog: %s", st)
		}
	}
	if !srv.Pane(shell).InteractiveReady || srv.Pane(cmd).InteractiveReady {
		t.Fatal("interactive_ready is for agent.start launches only")
	}
	noViolations(t, srv)
}
