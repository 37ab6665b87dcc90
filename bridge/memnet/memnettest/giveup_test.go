package memnettest_test

import (
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestOverdueBriefAcrossCutLinkOneFate (issue 20, found by the simulator):
// a brief for a pane worker whose gateway is cut from the broker waits in
// its inbox past the sender's receipt bound. The sender's gateway used to
// report it FAILED ("probably not typed") on its own, and the brief was
// typed when the link came back: two fates. Now the worker's gateway
// decides (GIVE_UP): whichever of the brief and the GIVE_UP it takes first
// wins — typed with its receipt, or FAILED with a dead-letter record —
// never both. Run it a few times (-count): the order is the broker's.
func TestOverdueBriefAcrossCutLinkOneFate(t *testing.T) {
	herdr := &panes{result: map[string]bridge.InjectReceipt{"%1": {Status: bridge.StatusSubmitted}}}
	short := func(cfg *bridge.Config) { cfg.InjectWait, cfg.ReceiptWait = 100*time.Millisecond, 100*time.Millisecond }
	c := memnettest.New(t)
	a := c.Start("a", short)
	b := c.Start("b", short, func(cfg *bridge.Config) { cfg.Injector = herdr })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	if _, _, err := b.Core.Register(ctx, bridge.RegisterRequest{Name: "pw", Role: bridge.RoleWorker, PaneID: "%1"}); err != nil {
		t.Fatal(err)
	}
	c.Converge(t)

	b.Transport.LinkDown()
	r, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "pw@b", Message: "brief behind a cut link"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// well past InjectWait + ReceiptWait and several sweeps: the old code
	// has reported it FAILED by now
	time.Sleep(time.Second)
	b.Transport.LinkUp()

	typed := func() int {
		n := 0
		for _, br := range herdr.briefs() {
			if br.Env.MsgID == r.MsgID {
				n++
			}
		}
		return n
	}
	var failed, receipts int
	if r.Status == bridge.StatusFailed { // the call's own FAILED: one fate
		failed++
	}
	drain := func(wait time.Duration) {
		p, err := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Wait: wait, Max: 500}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			switch {
			case m.Corr != r.MsgID:
			case m.Kind == bridge.KindFailed:
				failed++
			case m.Kind == bridge.KindInjected:
				receipts++
			}
		}
	}
	deadline := time.Now().Add(memnettest.Timeout)
	for typed() == 0 && failed == 0 && time.Now().Before(deadline) {
		drain(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a second fate would follow the first
	drain(200 * time.Millisecond)

	n := typed()
	switch {
	case n > 0 && failed > 0:
		t.Fatalf("two fates: typed %d time(s) and reported FAILED %d time(s)", n, failed)
	case n > 1:
		t.Fatalf("typed %d times", n)
	case n == 1 && receipts == 0:
		t.Fatal("typed, but its receipt never reached the sender")
	case n == 0 && failed == 0:
		t.Fatal("neither typed nor reported")
	case failed > 1:
		t.Errorf("reported FAILED %d times", failed)
	}
	if failed == 1 && !deadLogged(t, r.MsgID, a, b) {
		t.Error("reported FAILED without a dead-letter record")
	}
	t.Logf("typed %d, receipts %d, failed %d", n, receipts, failed)
}

// deadLogged reports whether any of hosts has a dead-letter record of msgID.
func deadLogged(t *testing.T, msgID string, hosts ...*memnettest.Host) bool {
	for _, h := range hosts {
		recs, err := h.Core.DeadLetters(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range recs {
			if d.MsgID == msgID {
				return true
			}
		}
	}
	return false
}
