package bridge_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestPaneQueueFullDiskFailsOnce (issue 20, found by the simulator's disk
// schedules): a queued brief whose typing the store refuses (a full disk)
// is FAILED to its sender once. The store refuses taking it out of its
// pane's queue as well, so it stays the head: before the fix the runner
// typed it again round after round, each time telling the sender FAILED
// (dozens, at once), and once the disk had room it would be typed after
// its FAILED — two fates. Now the head is only taken out, never typed or
// reported again — and, like every undelivered message, it has its line
// in the dead-letter log once the disk has room (it had none before).
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
	eventually(t, "a dead-letter record for the brief not typed", func() bool {
		dl, err := c.DeadLetters(10)
		return err == nil && len(dl) == 1 && dl[0].MsgID == res.MsgID && dl[0].Reported
	})
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

// TestPaneQueueFullDiskNotQueuedIsDeadLettered (issue 20, the simulator's
// disk schedules: "no dead-letter record"): a brief the full disk keeps
// out of its pane's queue — acked from the inbox, so its only copy — is
// reported like every undelivered message: one FAILED to its sender and a
// line in the dead-letter log, written once the disk has room. Before,
// the FAILED went out alone and the log never had the line.
func TestPaneQueueFullDiskNotQueuedIsDeadLettered(t *testing.T) {
	inj := &busyInjector{}
	var st *store.Store
	c := queueCore(t, inj, func(cfg *bridge.Config) { st = cfg.Store })
	p, res, got := briefUnderFault(t, c, func() { st.SetDiskFull(true) })
	st.SetDiskFull(false)
	got2 := pollReceipts(t, c, p.GID, res.MsgID, 300*time.Millisecond)
	if got[bridge.KindFailed] != 1 || len(got2) != 0 {
		t.Fatalf("receipts: %v, then %v; want exactly one FAILED (send answered %+v)", got, got2, res)
	}
	eventually(t, "a dead-letter record for the brief not queued", func() bool {
		dl, err := c.DeadLetters(10)
		return err == nil && len(dl) == 1 && dl[0].MsgID == res.MsgID && dl[0].Reported
	})
}

// ackRefusingTransport refuses the acks of SEND deliveries while refuse is
// set, as the embedded transport does on a full disk: the error says the
// settle is not durable, and the settle is kept and applied later (here:
// at once underneath).
type ackRefusingTransport struct {
	*embedded.Transport
	refuse atomic.Bool
}

func (a *ackRefusingTransport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	return a.Transport.Consume(ctx, gid, prefetch, func(d bridge.Delivery) {
		if d.Env != nil && d.Env.Kind == bridge.KindSend && a.refuse.Load() {
			d.Acker = refusedAck{d.Acker}
		}
		h(d)
	})
}

type refusedAck struct{ bridge.Acker }

func (r refusedAck) Ack() error {
	_ = r.Acker.Ack()
	return fmt.Errorf("settle: %w (kept: the next commit the store takes settles it)", syscall.ENOSPC)
}

// TestBriefAckRefusedIsDeadLettered (the simulator's disk and pane
// schedules): a brief whose ack its transport refuses (a full disk) is not
// typed — a copy could come back and be typed again — and is reported as
// every undelivered message is: one FAILED to its sender and a line in the
// dead-letter log. The FAILED went out alone before, without the line.
func TestBriefAckRefusedIsDeadLettered(t *testing.T) {
	inj := &busyInjector{}
	inj.ready.Store(true)
	var at *ackRefusingTransport
	c := startCore(t, func(cfg *bridge.Config, tr *embedded.Transport) {
		at = &ackRefusingTransport{Transport: tr}
		cfg.Transport, cfg.Injector, cfg.MaxWait = at, inj, 3*time.Second
		cfg.InjectWait, cfg.ReceiptWait, cfg.SweepEvery, cfg.PaneRecheck = time.Second, time.Second, 20*time.Millisecond, time.Hour
	})
	_, res, got := briefUnderFault(t, c, func() { at.refuse.Store(true) })
	if got[bridge.KindFailed] != 1 || len(got) != 1 {
		t.Fatalf("receipts %v (send answered %+v), want exactly one FAILED", got, res)
	}
	inj.mu.Lock()
	typed := append([]string(nil), inj.typed...)
	inj.mu.Unlock()
	if len(typed) != 0 {
		t.Fatalf("a brief whose ack was refused was typed: %q", typed)
	}
	eventually(t, "a dead-letter record for the brief not acked", func() bool {
		dl, err := c.DeadLetters(10)
		return err == nil && len(dl) == 1 && dl[0].MsgID == res.MsgID && dl[0].Reported
	})
}

// briefUnderFault registers a primary "lead" and a pane worker "w", turns
// fault on, sends w a brief and counts, by kind, the receipts lead gets
// for it within 500 ms (a FAILED the call returned itself included).
func briefUnderFault(t *testing.T, c *bridge.Core, fault func()) (bridge.Entity, *bridge.Result, map[bridge.Kind]int) {
	t.Helper()
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	fault()
	res, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	got := pollReceipts(t, c, p.GID, res.MsgID, 500*time.Millisecond)
	if res.Status == bridge.StatusFailed {
		got[bridge.KindFailed]++ // the call waited for it and returned it
	}
	return p, res, got
}
