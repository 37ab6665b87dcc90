package gateway_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// Lifecycle control (issue 14, items 1-2): bridge_stop, bridge_interrupt
// and priority "next", through a real gateway, real MCP clients and the
// fake herdr.

// TestStopBusyWorker: a worker mid-turn with an open ask at its primary
// and a brief queued behind its turn is stopped: the primary's answer to
// the ask is abandoned, the brief it worked on is ABANDONED and the queued
// one FAILED to their sender, pane.close was sent, and the roster no
// longer has it. A retry with the same stop_id does nothing again; another
// worker may not stop it.
func TestStopBusyWorker(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(0)) // turns end when the test says
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.PaneConn(t, g, "w", "worker", pane)
	other := gatewaytest.HTTPConn(t, g, "w2", "worker")

	sentCh := make(chan gatewaytest.CallResult, 1)
	go func() {
		sentCh <- p.Call("bridge_send", map[string]any{"target": "w", "message": "Refactor the parser.", "wait_s": 20})
	}()
	gatewaytest.Eventually(t, 5*time.Second, "the brief typed and the worker busy", func() bool {
		return len(fake.Submitted(pane)) == 1 && fake.Status(pane) == "working"
	})
	var asked gatewaytest.CallResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		asked = w.Call("bridge_ask", map[string]any{"question": "Which parser?", "timeout_s": 600})
	}()
	sent := <-sentCh
	if sent.Status != "asked" || sent.TurnID == "" {
		t.Fatalf("open send: %+v %s", sent.Result, sent.Text)
	}
	queued := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Then the lexer."}, "queued")

	if r := other.Call("bridge_stop", map[string]any{"target": "w"}); !r.IsError || !strings.Contains(r.Text, "refused") || !strings.Contains(r.Text, "only itself") {
		t.Fatalf("a worker stopping another: %+v %s", r.Result, r.Text)
	}
	if _, err := g.Core().Resolve("w"); err != nil {
		t.Fatalf("the refused stop removed the worker: %v", err)
	}

	stopID := "5d0c1b8e-2a3f-4c5d-8e9f-0a1b2c3d4e5f"
	r := p.Call("bridge_stop", map[string]any{"target": "w", "reason": "wrong approach", "close_pane": true, "stop_id": stopID})
	if r.IsError || r.Status != bridge.StatusStopped || strings.Contains(r.Reason, "wrong approach") || !strings.Contains(r.Reason, "passed on") || !strings.Contains(r.Reason, "closed") {
		t.Fatalf("stop: %+v %s", r.Result, r.Text)
	}
	if n := requests(fake, "pane.close")(); n != 1 || !fake.Pane(pane).Closed {
		t.Fatalf("%d pane.close requests, pane %+v", n, fake.Pane(pane))
	}
	if _, err := g.Core().Resolve("w"); err == nil {
		t.Fatal("the stopped worker is still registered")
	}
	for _, e := range g.Core().Roster().Entities {
		if e.Name == "w" {
			t.Fatalf("roster still lists w: %+v", e)
		}
	}
	// the ask it had open at the primary: answering it now is abandoned
	ans := p.Call("bridge_send", map[string]any{"target": "w", "message": "The JSON one.", "turn_id": sent.TurnID})
	if ans.Status != bridge.StatusAbandoned {
		t.Fatalf("answer to the stopped worker's ask: %+v %s", ans.Result, ans.Text)
	}
	// the brief it worked on: ABANDONED, naming the stop; the queued one: FAILED
	var abandoned, failed *bridge.Message
	gatewaytest.Eventually(t, 10*time.Second, "ABANDONED and FAILED held for the sender", func() bool {
		for _, m := range p.Call("bridge_poll", map[string]any{"max": 100}).Messages {
			switch {
			case m.Kind == bridge.KindAbandoned && m.Corr == sent.MsgID:
				abandoned = &m
			case m.Kind == bridge.KindFailed && m.Corr == queued.MsgID:
				failed = &m
			}
		}
		return abandoned != nil && failed != nil
	})
	if !strings.Contains(abandoned.Body, "stopped by lead@") || !strings.Contains(abandoned.Body, "wrong approach") {
		t.Fatalf("ABANDONED for the brief it worked on: %q", abandoned.Body)
	}
	// a retry with the same stop_id: nothing again
	again := p.Call("bridge_stop", map[string]any{"target": "w", "stop_id": stopID})
	if again.IsError || again.Status != bridge.StatusStopped || !again.Deduped {
		t.Fatalf("retried stop: %+v %s", again.Result, again.Text)
	}
	if n := requests(fake, "pane.close")(); n != 1 {
		t.Fatalf("%d pane.close requests after the retry", n)
	}
	wg.Wait()
	if asked.Status == bridge.StatusAnswered {
		t.Fatalf("the stopped worker's ask was answered: %+v", asked.Result)
	}
}

// TestStopSelfAndOthers: a worker may stop itself (its pane left open by
// default: it was not spawned); a primary may not be stopped; a spawned
// worker's pane closes by default, and a pane already gone counts as
// closed.
func TestStopSelfAndOthers(t *testing.T) {
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, func(c *gateway.Config) {
		c.File.Profiles = map[string]herdr.Profile{"reviewer": {Kind: "claude"}}
	})
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.PaneConn(t, g, "w", "worker", pane)
	if r := w.Call("bridge_stop", map[string]any{"target": "lead"}); !r.IsError || !strings.Contains(r.Text, "workers only") {
		t.Fatalf("stopping a primary: %+v %s", r.Result, r.Text)
	}
	r := w.Call("bridge_stop", map[string]any{"target": "w"})
	if r.IsError || r.Status != bridge.StatusStopped || !strings.Contains(r.Reason, "left open") || fake.Pane(pane).Closed {
		t.Fatalf("self-stop: %+v %s", r.Result, r.Text)
	}
	spawned := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev"})
	if spawned.IsError || spawned.Status != bridge.StatusConfirmed {
		t.Fatalf("spawn: %+v %s", spawned.Result, spawned.Text)
	}
	e, err := g.Core().Resolve("rev")
	if err != nil || !e.Spawned {
		t.Fatalf("spawned entity %+v %v", e, err)
	}
	fake.SetStatus(e.PaneID, "working")
	r = p.Call("bridge_stop", map[string]any{"target": "rev"})
	if r.IsError || !strings.Contains(r.Reason, "closed") || !fake.Pane(e.PaneID).Closed {
		t.Fatalf("stop of a spawned worker: %+v %s", r.Result, r.Text)
	}
	// a pane that is gone already: the stop still ends the worker
	pane2 := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	gatewaytest.PaneConn(t, g, "w3", "worker", pane2)
	fake.InjectFault("pane.close", herdrtest.Fault{Code: "pane_not_found", Message: "pane " + pane2 + " not found"})
	r = p.Call("bridge_stop", map[string]any{"target": "w3", "close_pane": true})
	if r.IsError || !strings.Contains(r.Reason, "already gone") {
		t.Fatalf("stop with the pane gone: %+v %s", r.Result, r.Text)
	}
	if _, err := g.Core().Resolve("w3"); err == nil {
		t.Fatal("w3 still registered")
	}
}

// TestInterruptWorker: Escape is written once into a working agent and the
// result is interrupted; with a message, the message is typed next — before
// a brief that was queued earlier — and that brief follows it.
func TestInterruptWorker(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	p, pane := queueSetup(t, fake, nil)
	p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Long job."}, "submitted")
	p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Queued job."}, "queued")
	r := p.Call("bridge_interrupt", map[string]any{"target": "w", "message": "Stop: do the urgent fix first."})
	if r.IsError || r.Status != bridge.StatusInterrupted || r.MsgID == "" {
		t.Fatalf("interrupt: %+v %s", r.Result, r.Text)
	}
	if n := escapes(fake, pane); n != 1 || fake.Pane(pane).Interrupts != 1 {
		t.Fatalf("%d Escape writes, %d turns interrupted", n, fake.Pane(pane).Interrupts)
	}
	gatewaytest.Eventually(t, 10*time.Second, "the interrupt's message typed", func() bool { return len(fake.Submitted(pane)) == 2 })
	if s := fake.Submitted(pane)[1]; !strings.Contains(s, "urgent fix") {
		t.Fatalf("typed after the interrupt: %q", s)
	}
	fake.FinishTurn(pane)
	gatewaytest.Eventually(t, 10*time.Second, "the queued brief typed after it", func() bool { return len(fake.Submitted(pane)) == 3 })
	if s := fake.Submitted(pane)[2]; !strings.Contains(s, "Queued job.") {
		t.Fatalf("typed third: %q", s)
	}
	// nothing to interrupt: no key
	fake.FinishTurn(pane)
	gatewaytest.Eventually(t, 5*time.Second, "the worker idle", func() bool { return fake.Status(pane) != "working" })
	if r := p.Call("bridge_interrupt", map[string]any{"target": "w"}); r.Status != bridge.StatusNotWorking || escapes(fake, pane) != 1 {
		t.Fatalf("interrupting an idle worker: %+v, %d escapes", r.Result, escapes(fake, pane))
	}
}

// TestSendPriorityNext: a brief sent with priority next is typed before
// briefs that were queued earlier, without interrupting the running turn;
// priority on a message to a primary is refused.
func TestSendPriorityNext(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	p, pane := queueSetup(t, fake, nil)
	p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "First."}, "submitted")
	p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Second."}, "queued")
	next := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Urgent.", "priority": "next"}, "queued")
	if !strings.Contains(next.Reason, "place 1") {
		t.Fatalf("a next brief behind a running turn only: %s", next.Reason)
	}
	if escapes(fake, pane) != 0 {
		t.Fatal("priority next pressed Escape")
	}
	for i, want := range []string{"Urgent.", "Second."} {
		fake.FinishTurn(pane)
		gatewaytest.Eventually(t, 10*time.Second, "brief typed", func() bool { return len(fake.Submitted(pane)) == i+2 })
		if s := fake.Submitted(pane)[i+1]; !strings.Contains(s, want) {
			t.Fatalf("typed %d: %q, want %s", i+2, s, want)
		}
	}
	if r := p.Call("bridge_send", map[string]any{"target": "w", "message": "x", "priority": "soon"}); !r.IsError || !strings.Contains(r.Text, "not valid") {
		t.Fatalf("bad priority: %+v %s", r.Result, r.Text)
	}
}

// escapes counts the PTY writes into pane that were a lone Escape.
func escapes(f *herdrtest.Server, pane string) int {
	n := 0
	for _, w := range f.Writes(pane) {
		if string(w) == "\x1b" {
			n++
		}
	}
	return n
}

// TestCrossHostStopAndInterrupt: a primary on host A interrupts a busy
// worker on host B (INTERRUPT on control.B: Escape pressed there, the
// message typed next), then stops it (STOP on control.B): B closes the
// pane and removes the worker, the brief still queued there is reported
// FAILED back on A, A's roster loses it, and a retry with the stop_id is
// deduplicated. A worker on A may not stop it.
func TestCrossHostStopAndInterrupt(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	hostA, hostB := gatewaytest.UniqueHost("la"), gatewaytest.UniqueHost("lb")
	ga := gatewaytest.StartHost(t, hostA, brokerURL(t))
	gb := gatewaytest.StartHost(t, hostB, brokerURL(t), func(c *gateway.Config) {
		c.File.Herdr.Disabled = false
		c.File.Herdr.Socket = fake.SocketPath()
		c.Core.InjectWait = 8 * time.Second
		c.Core.PaneRecheck = 200 * time.Millisecond
	})
	gatewaytest.PaneConn(t, gb, "w", "worker", pane)
	p := gatewaytest.HTTPConn(t, ga, "lead", "primary")
	wa := gatewaytest.HTTPConn(t, ga, "wa", "worker")
	target := "w@" + hostB
	gatewaytest.Eventually(t, 10*time.Second, "A sees w on B", func() bool { _, err := ga.Core().Resolve(target); return err == nil })
	gatewaytest.Eventually(t, 10*time.Second, "B sees lead and wa", func() bool {
		_, e1 := gb.Core().Resolve("lead@" + hostA)
		_, e2 := gb.Core().Resolve("wa@" + hostA)
		return e1 == nil && e2 == nil
	})
	p.MustStatus("bridge_send", map[string]any{"target": target, "message": "Long job."}, "submitted")
	queued := p.MustStatus("bridge_send", map[string]any{"target": target, "message": "Queued job."}, "queued")

	r := p.Call("bridge_interrupt", map[string]any{"target": target, "message": "Urgent fix first."})
	if r.IsError || r.Status != bridge.StatusInterrupted || escapes(fake, pane) != 1 {
		t.Fatalf("remote interrupt: %+v %s (%d escapes)", r.Result, r.Text, escapes(fake, pane))
	}
	gatewaytest.Eventually(t, 10*time.Second, "the message typed next on B", func() bool { return len(fake.Submitted(pane)) == 2 })
	if s := fake.Submitted(pane)[1]; !strings.Contains(s, "Urgent fix first.") {
		t.Fatalf("typed after the interrupt: %q", s)
	}

	if r := wa.Call("bridge_stop", map[string]any{"target": target}); !r.IsError || !strings.Contains(r.Text, "refused") {
		t.Fatalf("a worker stopping a remote worker: %+v %s", r.Result, r.Text)
	}
	stopID := "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	r = p.Call("bridge_stop", map[string]any{"target": target, "reason": "plan changed", "close_pane": true, "stop_id": stopID})
	if r.IsError || r.Status != bridge.StatusStopped || strings.Contains(r.Reason, "plan changed") || !strings.Contains(r.Reason, "passed on") || !strings.Contains(r.Reason, "closed") {
		t.Fatalf("remote stop: %+v %s", r.Result, r.Text)
	}
	if !fake.Pane(pane).Closed {
		t.Fatal("the pane on B is still open")
	}
	if _, err := gb.Core().Resolve("w"); err == nil {
		t.Fatal("w is still registered on B")
	}
	gatewaytest.Eventually(t, 10*time.Second, "A's roster without w", func() bool { _, err := ga.Core().Resolve(target); return err != nil })
	if m := receiptsHeld(t, p, 15*time.Second, queued.MsgID)[queued.MsgID]; m.Kind != bridge.KindFailed {
		t.Fatalf("queued brief's receipt: %+v", m)
	}
	again := p.Call("bridge_stop", map[string]any{"target": target, "stop_id": stopID})
	if again.IsError || !again.Deduped || requests(fake, "pane.close")() != 1 {
		t.Fatalf("retried remote stop: %+v %s", again.Result, again.Text)
	}
}
