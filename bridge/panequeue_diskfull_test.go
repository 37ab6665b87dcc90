package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestPaneQueueFullDiskFailsOnce (issue 20, found by the simulator's disk
// schedules): a queued brief whose typing the store refuses (a full disk)
// is FAILED to its sender once. The store refuses taking it out of its
// pane's queue as well, so it stays the head: before the fix the runner
// typed it again round after round, each time telling the sender FAILED
// (dozens, at once), and once the disk had room it would be typed after
// its FAILED — two fates. Now the head is only taken out, never typed or
// reported again.
func TestPaneQueueFullDiskFailsOnce(t *testing.T) {
	inj := &busyInjector{}
	var st *store.Store
	c := queueCore(t, inj, func(cfg *bridge.Config) { st = cfg.Store })
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
	if err != nil || res.Status != bridge.StatusQueued {
		t.Fatalf("send: %+v (%v)", res, err)
	}
	st.SetDiskFull(true)
	inj.ready.Store(true)
	c.PaneStatus("p1", "idle")
	failed := pollReceipts(t, c, p.GID, res.MsgID, time.Second)
	st.SetDiskFull(false)
	c.PaneStatus("p1", "idle") // the runner looks again with room on the disk
	after := pollReceipts(t, c, p.GID, res.MsgID, 500*time.Millisecond)
	if failed[bridge.KindFailed] != 1 || len(after) != 0 {
		t.Fatalf("receipts for one brief: %v while the disk was full, %v after; want exactly one FAILED", failed, after)
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	if len(inj.typed) != 0 {
		t.Fatalf("a brief reported FAILED was typed after all: %q", inj.typed)
	}
}

// pollReceipts counts, by kind, what gid drains about corr within d.
func pollReceipts(t *testing.T, c *bridge.Core, gid, corr string, d time.Duration) map[bridge.Kind]int {
	t.Helper()
	n := map[bridge.Kind]int{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		r, err := c.Poll(context.Background(), gid, bridge.PollRequest{Wait: 100 * time.Millisecond, Max: 500}, nil)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, m := range r.Messages {
			if m.Corr == corr {
				n[m.Kind]++
			}
		}
	}
	return n
}
