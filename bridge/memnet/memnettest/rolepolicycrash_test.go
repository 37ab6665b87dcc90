package memnettest_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// crashAfterRefusal closes its gateway's connection the moment the first
// FAILED it publishes is out: the brief that FAILED answers is then not
// acked, and comes back to the gateway's next start — a crash between the
// two, as SPEC §4 allows.
type crashAfterRefusal struct {
	tr      atomic.Pointer[bridge.Transport]
	crashed atomic.Bool
}

func (o *crashAfterRefusal) Observe(e bridge.Event) {
	if e.Hop != bridge.HopPublish || e.Kind != bridge.KindFailed || e.Status != "published" || !o.crashed.CompareAndSwap(false, true) {
		return
	}
	if c, ok := (*o.tr.Load()).(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// TestRolePolicyRefusalOnceAcrossCrash: b refuses a's worker's brief,
// and crashes after its FAILED went out but before the brief's ack; the
// restarted b refuses the brief again. Its sender still hears FAILED
// about it exactly once.
func TestRolePolicyRefusalOnceAcrossCrash(t *testing.T) {
	herdr := &panes{result: map[string]bridge.InjectReceipt{}}
	c := memnettest.New(t)
	a := newRoleRig(t, c, "a", herdr, workersMayBrief)
	crash := &crashAfterRefusal{}
	b := newRoleRig(t, c, "b", herdr, func(cfg *bridge.Config) {
		tr := cfg.Transport
		crash.tr.Store(&tr)
		cfg.Observer = crash
	})
	c.Converge(t)
	res, err := a.h.Core.Send(ctx, a.w2.GID, bridge.SendRequest{Target: b.pw.Addr(), Message: "refused, then crashed"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	memnettest.Eventually(t, "b crashed after its FAILED", crash.crashed.Load)
	b2 := c.Restart(b.h, func(cfg *bridge.Config) { cfg.Injector = herdr })
	memnettest.Eventually(t, "the restarted b refused the brief again", func() bool { return b2.Core.Refused()[bridge.RefuseRolePolicy] == 1 })
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Second) // the second FAILED, if any, is out before the refusal is counted
	for time.Now().Before(deadline) {
		r, err := a.h.Core.Poll(ctx, a.w2.GID, bridge.PollRequest{Wait: 100 * time.Millisecond, Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == res.MsgID {
				seen[m.MsgID] = true
			}
		}
	}
	if len(seen) != 1 {
		t.Fatalf("the sender heard %d FAILEDs about its refused brief, want exactly 1", len(seen))
	}
}
