package bridge_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// failedCut is a transport whose publishes of FAILED fail while cut is
// set: the link a kill takes, at the moment a removal reports.
type failedCut struct {
	bridge.Transport
	cut   atomic.Bool
	tried atomic.Int32
}

func (f *failedCut) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	if env.Kind == bridge.KindFailed && f.cut.Load() {
		f.tried.Add(1)
		return fmt.Errorf("failedCut: %w", bridge.ErrClosed)
	}
	return f.Transport.Publish(ctx, key, env, mandatory)
}

// TestRemovalWhoseReportFailedReportsAfterRestart: a removal whose FAILED
// receipts cannot be published (a kill racing a stop, issue 20) neither
// records them as reported nor deletes what it held, so the next start
// finishes the removal and its senders hear FAILED. It lost all three:
// the once key was persisted and the held messages acked before the
// publish failed.
func TestRemovalWhoseReportFailedReportsAfterRestart(t *testing.T) {
	var tr *failedCut
	h := newHarness(t, func(c *bridge.Config) {
		tr = &failedCut{Transport: c.Transport}
		c.Transport = tr
	})
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	f := newFates()
	for i := range 3 {
		f.accept(h.send(s, bridge.SendRequest{Target: "w", Message: fmt.Sprintf("m%d", i)}).MsgID, s.Name)
	}
	h.heldFor("w", 3)
	tr.cut.Store(true)
	err := h.c.Remove(context.Background(), w.GID)
	tr.cut.Store(false)
	t.Logf("remove with its FAILEDs cut: %v (%d tried)", err, tr.tried.Load())
	if tr.tried.Load() == 0 {
		t.Fatal("no FAILED was published during the removal")
	}
	h.restart()
	eventually(t, "the removal is finished", func() bool { _, ok := h.c.Entity(w.GID); return !ok })
	collectReports(t, h, s, f)
	f.check(t)
	if len(f.reported) != 3 {
		t.Fatalf("reported %d of 3", len(f.reported))
	}
}

// TestGivenBackDuringRemovalWhoseReportFailedReportsAfterRestart: a call
// holds a message of an entity being removed, then gives it back while
// FAILED cannot be published, and the gateway restarts (issue 20, sim
// seed 2042060565231813901). The removal waits for the call and leaves
// the message in the store, so the next start reports it. It was lost:
// the give-back settled it as reported and the removal, not waiting for
// the call, deleted what the store held.
func TestGivenBackDuringRemovalWhoseReportFailedReportsAfterRestart(t *testing.T) {
	var tr *failedCut
	h := newHarness(t, func(c *bridge.Config) {
		tr = &failedCut{Transport: c.Transport}
		c.Transport = tr
	})
	ctx := context.Background()
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	f := newFates()
	f.accept(h.send(s, bridge.SendRequest{Target: "w", Message: "m"}).MsgID, s.Name)
	h.heldFor("w", 1)
	ho := &bridge.Handover{}
	r, err := h.c.Poll(bridge.WithHandover(ctx, ho), w.GID, bridge.PollRequest{}, nil)
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("poll: %v, %+v", err, r)
	}
	tr.cut.Store(true)
	removed := make(chan error, 1)
	go func() { removed <- h.c.Remove(ctx, w.GID) }()
	eventually(t, "w is being removed", func() bool { _, ok := h.c.Entity(w.GID); return !ok })
	ho.Return(false) // the client never had it: given back, to be reported
	eventually(t, "its FAILED was tried", func() bool { return tr.tried.Load() > 0 })
	h.restart()
	t.Logf("remove: %v", <-removed)
	tr.cut.Store(false)
	h.restart() // the start before ran with FAILED cut: this one reports
	collectReports(t, h, s, f)
	f.check(t)
	if len(f.reported) != 1 {
		t.Fatalf("reported %d of 1", len(f.reported))
	}
}

// TestQueuedBriefOfRemovedWorkerWhoseReportFailedReportsAfterRestart: a
// brief queued at a busy pane whose worker is removed is failed by the
// pane's runner; when that FAILED cannot be published (a kill, issue 20,
// sim seed 5711772003048015001) the brief stays in its queue and the next
// start reports it. It was dequeued, its sender told nothing.
func TestQueuedBriefOfRemovedWorkerWhoseReportFailedReportsAfterRestart(t *testing.T) {
	var tr *failedCut
	h := newHarness(t, func(c *bridge.Config) {
		tr = &failedCut{Transport: c.Transport}
		c.Transport, c.Injector, c.PaneRecheck = tr, &busyInjector{}, time.Hour
	})
	s := h.reg("s", bridge.RolePrimary)
	w, _, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	res := h.send(s, bridge.SendRequest{Target: "w", Message: "brief"})
	if res.Status != bridge.StatusQueued {
		t.Fatalf("send: %+v", res)
	}
	f := newFates()
	f.accept(res.MsgID, s.Name)
	tr.cut.Store(true)
	if err := h.c.Remove(context.Background(), w.GID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "its FAILED was tried", func() bool { return tr.tried.Load() > 0 })
	tr.cut.Store(false)
	h.restart()
	collectReports(t, h, s, f)
	f.check(t)
	if len(f.reported) != 1 {
		t.Fatalf("reported %d of 1", len(f.reported))
	}
}
