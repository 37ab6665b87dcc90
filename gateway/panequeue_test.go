package gateway_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// The per-pane brief queue and own-draft recovery (issue 10, items 1-2),
// through a real gateway, real MCP clients and the fake herdr.

// writesWith counts the PTY writes into pane that carry text.
func writesWith(f *herdrtest.Server, pane, text string) int {
	n := 0
	for _, w := range f.Writes(pane) {
		n += bytes.Count(w, []byte(text))
	}
	return n
}

// requests counts fake's requests of method: how often the gateway looked.
func requests(f *herdrtest.Server, method string) func() int {
	return func() int { return strings.Count(strings.Join(f.Requests(), "\n"), `"method":"`+method+`"`) }
}

// queueSetup is a gateway on a fake herdr with a primary "lead" and a
// worker "w" in a pane.
func queueSetup(t *testing.T, fake *herdrtest.Server, tune func(*gateway.Config)) (p *gatewaytest.Conn, pane string) {
	t.Helper()
	pane = fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, tune)
	p = gatewaytest.HTTPConn(t, g, "lead", "primary")
	gatewaytest.PaneConn(t, g, "w", "worker", pane)
	return p, pane
}

// receiptsHeld drains what is held for p until want briefs (by msgId) have
// their final receipt — an INJECTED whose rung is not queued, or a FAILED —
// and returns them; a second final receipt for one brief fails the test.
func receiptsHeld(t *testing.T, p *gatewaytest.Conn, within time.Duration, want ...string) map[string]bridge.Message {
	t.Helper()
	wanted := map[string]bool{}
	for _, id := range want {
		wanted[id] = true
	}
	got := map[string]bridge.Message{}
	deadline := time.Now().Add(within)
	for len(got) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("final receipts for %d of %d briefs within %v: %+v", len(got), len(want), within, got)
		}
		r := p.Call("bridge_poll", map[string]any{"wait_s": 1, "max": 100})
		for _, m := range r.Messages {
			final := m.Kind == bridge.KindFailed || m.Kind == bridge.KindInjected && !strings.HasPrefix(m.Body, bridge.StatusQueued)
			if !wanted[m.Corr] || !final {
				continue
			}
			if prev, dup := got[m.Corr]; dup {
				t.Fatalf("brief %s got two receipts: %q then %q", m.Corr, prev.Body, m.Body)
			}
			got[m.Corr] = m
		}
	}
	return got
}

// TestPaneQueueBusyWorker: a brief to a working agent returns queued at
// once (the reason names the status and the place), is typed once when the
// agent goes idle, and its late receipt "submitted" is held for the sender
// with corr = the brief's msgId.
func TestPaneQueueBusyWorker(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SetStatus(pane, "working")
	start := time.Now()
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Fix the build"}, "queued")
	if !strings.Contains(r.Reason, "w is working") || !strings.Contains(r.Reason, "place 1") || !strings.Contains(r.Next, "bridge_poll") {
		t.Fatalf("queued reason %q next %q", r.Reason, r.Next)
	}
	t.Logf("send returned queued in %v", time.Since(start).Round(time.Millisecond))
	if n := len(fake.Submitted(pane)); n != 0 {
		t.Fatalf("typed into a working agent: %d turns", n)
	}
	fake.SetStatus(pane, "idle")
	got := receiptsHeld(t, p, 10*time.Second, r.MsgID)[r.MsgID]
	if got.Kind != bridge.KindInjected || !strings.HasPrefix(got.Body, "submitted") {
		t.Fatalf("late receipt %s %q", got.Kind, got.Body)
	}
	if s := fake.Submitted(pane); len(s) != 1 || !strings.Contains(s[0], "Fix the build") || writesWith(fake, pane, "Fix the build") != 1 {
		t.Fatalf("submitted %q", s)
	}
}

// TestPaneQueueInOrder: 20 briefs to a worker whose turns take a while are
// typed one per turn, in order: none lost, none merged into another, none
// typed twice, each with exactly one final receipt.
func TestPaneQueueInOrder(t *testing.T) {
	const n = 20
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(150*time.Millisecond))
	p, pane := queueSetup(t, fake, nil)
	var ids, queuedIDs []string
	start := time.Now()
	for i := range n {
		r := p.Call("bridge_send", map[string]any{"target": "w", "message": fmt.Sprintf("brief-%02d", i)})
		if r.IsError || (r.Status != "queued" && r.Status != "submitted") {
			t.Fatalf("send %d: %+v %s", i, r.Result, r.Text)
		}
		if r.Status == "queued" { // its receipt comes later, held
			queuedIDs = append(queuedIDs, r.MsgID)
		}
		ids = append(ids, r.MsgID)
	}
	got := receiptsHeld(t, p, 60*time.Second, queuedIDs...)
	elapsed := time.Since(start)
	subs := fake.Submitted(pane)
	if len(subs) != n {
		t.Fatalf("%d turns, want %d: %q", len(subs), n, subs)
	}
	for i, s := range subs {
		body := fmt.Sprintf("brief-%02d", i)
		if !strings.Contains(s, body) || strings.Count(s, "brief-") != 1 {
			t.Errorf("turn %d is %q, want only %s", i, s, body)
		}
		if w := writesWith(fake, pane, body); w != 1 {
			t.Errorf("%s written %d times", body, w)
		}
	}
	for _, id := range queuedIDs {
		if m := got[id]; !strings.HasPrefix(m.Body, "submitted") {
			t.Errorf("receipt of %s: %s %q", id, m.Kind, m.Body)
		}
	}
	t.Logf("%d briefs (%d returned queued, their receipts held) typed in order in %v: 0 lost, 0 merged, 0 twice", n, len(queuedIDs), elapsed.Round(time.Millisecond))
}

// TestPaneQueueBlockedDialog: a dialog queues the brief (the sender is told
// the worker waits on it); nothing is typed into the dialog, and the brief
// is typed once it is answered.
func TestPaneQueueBlockedDialog(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SetBlocked(pane, true)
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "After the dialog"}, "queued")
	if !strings.Contains(r.Reason, "dialog") {
		t.Fatalf("queued reason %q", r.Reason)
	}
	fake.SetBlocked(pane, false)
	got := receiptsHeld(t, p, 10*time.Second, r.MsgID)[r.MsgID]
	if !strings.HasPrefix(got.Body, "submitted") {
		t.Fatalf("receipt %s %q", got.Kind, got.Body)
	}
	if d := fake.TypedIntoDialog(pane); len(d) != 0 {
		t.Fatalf("typed into the dialog: %q", d)
	}
	if s := fake.Submitted(pane); len(s) != 1 || !strings.Contains(s[0], "After the dialog") {
		t.Fatalf("submitted %q", s)
	}
}

// TestPaneQueueOwnDraftRecovery: both Enters of a brief are swallowed, so
// it is reported uncertain and its text stays in the composer. The gateway
// recognises its own text, presses Enter once (no second paste), sends a
// late "submitted" receipt that says where it was found, and then types the
// next brief.
func TestPaneQueueOwnDraftRecovery(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SwallowEnters(pane, 2)
	first := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "First brief\nwith two lines"}, "uncertain")
	second := p.Call("bridge_send", map[string]any{"target": "w", "message": "Second brief"})
	if second.IsError || second.Status != "queued" && second.Status != "submitted" {
		t.Fatalf("second send: %+v %s", second.Result, second.Text)
	}
	var late bridge.Message
	if second.Status == "queued" {
		got := receiptsHeld(t, p, 10*time.Second, first.MsgID, second.MsgID)
		late = got[first.MsgID]
		if !strings.HasPrefix(got[second.MsgID].Body, "submitted") {
			t.Fatalf("second receipt %q", got[second.MsgID].Body)
		}
	} else {
		late = receiptsHeld(t, p, 10*time.Second, first.MsgID)[first.MsgID]
	}
	if late.Kind != bridge.KindInjected || !strings.HasPrefix(late.Body, "submitted: late receipt") || !strings.Contains(late.Body, "found unsent in the composer") {
		t.Fatalf("late receipt %s %q", late.Kind, late.Body)
	}
	subs := fake.Submitted(pane)
	if len(subs) != 2 || !strings.Contains(subs[0], "First brief\nwith two lines") || strings.Contains(subs[0], "Second") || !strings.Contains(subs[1], "Second brief") {
		t.Fatalf("turns %q", subs)
	}
	if n := writesWith(fake, pane, "First brief"); n != 1 {
		t.Fatalf("the first brief was written %d times (re-pasted)", n)
	}
}

// TestPaneQueueUserDraft: a draft the user typed is never typed over: the
// brief stays queued (the sender is told why) until the draft is gone.
func TestPaneQueueUserDraft(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SetDraft(pane, "half-typed thought")
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Do not merge me"}, "queued")
	// it says a draft blocks the pane, never the draft's words: they are the person's, not herdbridge's
	if !strings.Contains(r.Reason, "unsent draft (18 characters)") || strings.Contains(r.Reason, "half-typed") {
		t.Fatalf("queued reason %q", r.Reason)
	}
	// the queue looks again (every 200 ms here) and still leaves the draft alone
	reads := requests(fake, "pane.read")
	seen := reads()
	gatewaytest.Eventually(t, 5*time.Second, "three more looks at the pane", func() bool { return reads() >= seen+3 })
	if c := fake.Composer(pane); c != "half-typed thought" || writesWith(fake, pane, "Do not merge me") != 0 {
		t.Fatalf("typed over the draft: composer %q", c)
	}
	fake.SetDraft(pane, "") // the user sent or cleared it
	got := receiptsHeld(t, p, 10*time.Second, r.MsgID)[r.MsgID]
	if !strings.HasPrefix(got.Body, "submitted") {
		t.Fatalf("receipt %q", got.Body)
	}
	if s := fake.Submitted(pane); len(s) != 1 || strings.Contains(s[0], "half-typed") {
		t.Fatalf("turns %q", s)
	}
}

// TestPaneQueueBroadcast: a broadcast reaching a busy pane waits in its
// queue and is typed when the agent is idle (it used to be dropped).
func TestPaneQueueBroadcast(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SetStatus(pane, "working")
	p.MustStatus("bridge_broadcast", map[string]any{"message": "Freeze merges"}, "confirmed")
	reads := requests(fake, "agent.get")
	seen := reads()
	gatewaytest.Eventually(t, 5*time.Second, "the queue looked at the busy pane", func() bool { return reads() >= seen+2 })
	if n := len(fake.Submitted(pane)); n != 0 {
		t.Fatalf("typed into a working agent: %d turns", n)
	}
	fake.SetStatus(pane, "idle")
	gatewaytest.Eventually(t, 10*time.Second, "the broadcast typed", func() bool { return len(fake.Submitted(pane)) == 1 })
	if s := fake.Submitted(pane)[0]; !strings.Contains(s, "Broadcast from lead") || !strings.Contains(s, "Freeze merges") {
		t.Fatalf("typed %q", s)
	}
}

// TestPaneQueueExpiry: a brief still queued at its expiresAt is FAILED to
// its sender (once: the sender's own overdue check does not report it
// again) and never typed.
func TestPaneQueueExpiry(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, func(c *gateway.Config) { c.Core.MessageTTL = 1500 * time.Millisecond })
	fake.SetStatus(pane, "working")
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Too late"}, "queued")
	got := receiptsHeld(t, p, 10*time.Second, r.MsgID)[r.MsgID]
	if got.Kind != bridge.KindFailed || !strings.Contains(got.Body, "expired") || !strings.Contains(got.Body, "w is working") && !strings.Contains(got.Body, "working") {
		t.Fatalf("receipt %s %q", got.Kind, got.Body)
	}
	fake.SetStatus(pane, "idle")
	if again := p.Call("bridge_poll", map[string]any{"wait_s": 2}); again.Status != "empty" {
		t.Fatalf("after the FAILED: %+v", again.Result)
	}
	if n := writesWith(fake, pane, "Too late"); n != 0 {
		t.Fatalf("an expired brief was typed %d times", n)
	}
}

// TestPaneQueuePaneClosed: briefs queued for a pane that closes are FAILED
// to their senders.
func TestPaneQueuePaneClosed(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SetStatus(pane, "working")
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Never typed"}, "queued")
	fake.ClosePane(pane)
	got := receiptsHeld(t, p, 10*time.Second, r.MsgID)[r.MsgID]
	if got.Kind != bridge.KindFailed || !strings.Contains(got.Body, "pane") {
		t.Fatalf("receipt %s %q", got.Kind, got.Body)
	}
}

// TestPaneQueueNeverWedgesAfterSwallowedEnters (issue 20, "the pane
// queue"): a brief whose Enter is swallowed while typed and again by
// own-draft recovery's first Enter is still submitted by a later, spaced
// Enter (never a second paste), and the brief behind it is typed: an idle
// agent with briefs queued is never left waiting on herdbridge's own text.
func TestPaneQueueNeverWedgesAfterSwallowedEnters(t *testing.T) {
	fake := herdrtest.New(t)
	p, pane := queueSetup(t, fake, nil)
	fake.SwallowEnters(pane, 3) // herdr's Enter, the Enter retry of typing, recovery's first Enter
	first := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "First brief, swallowed thrice"}, "uncertain")
	second := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "Second brief"}, "queued")
	got := receiptsHeld(t, p, 30*time.Second, first.MsgID, second.MsgID)
	if late := got[first.MsgID]; late.Kind != bridge.KindInjected || !strings.HasPrefix(late.Body, "submitted: late receipt") {
		t.Fatalf("first brief's late receipt %s %q", late.Kind, late.Body)
	}
	if r := got[second.MsgID]; r.Kind != bridge.KindInjected || !strings.HasPrefix(r.Body, "submitted") {
		t.Fatalf("second brief's receipt %s %q", r.Kind, r.Body)
	}
	subs := fake.Submitted(pane)
	if len(subs) != 2 || !strings.Contains(subs[0], "First brief") || strings.Contains(subs[0], "Second") || !strings.Contains(subs[1], "Second brief") {
		t.Fatalf("turns %q", subs)
	}
	if a, b := writesWith(fake, pane, "First brief"), writesWith(fake, pane, "Second brief"); a != 1 || b != 1 {
		t.Fatalf("written %d and %d times, want once each", a, b)
	}
}
