package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// leaseCore is a core whose delivery lease is lease.
func leaseCore(t *testing.T, lease time.Duration) (*bridge.Core, *embedded.Transport) {
	t.Helper()
	var tr *embedded.Transport
	c := startCore(t, func(cfg *bridge.Config, e *embedded.Transport) {
		tr = e
		cfg.MaxWait = 3 * time.Second
		cfg.DeliveryLease = lease
	})
	return c, tr
}

// pollUntil drains gid until it has n messages or 10 s pass.
func pollUntil(t *testing.T, c *bridge.Core, gid string, n int) []bridge.Message {
	t.Helper()
	var got []bridge.Message
	for deadline := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(deadline); {
		r, err := c.Poll(context.Background(), gid, bridge.PollRequest{Wait: 200 * time.Millisecond, Max: 500}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Messages...)
	}
	if len(got) != n {
		t.Fatalf("drained %d message(s), want %d: %+v", len(got), n, got)
	}
	return got
}

// waitHeld waits up to 10 s until n messages are held for gid.
func waitHeld(t *testing.T, c *bridge.Core, gid string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if held, _ := c.Held(gid); held.Total >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d message(s) never held", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeaseShowsInFlightThenReturnsRedelivered: messages a call handed over
// and its transport leased (the result was written, no evidence the client
// read it) are not lost to the entity's other sessions: a peek says they
// are in flight, and when the lease runs out they are held again and come
// flagged redelivered, in the structured result.
func TestLeaseShowsInFlightThenReturnsRedelivered(t *testing.T) {
	c, tr := leaseCore(t, 300*time.Millisecond)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	w, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker})
	for i := range 3 {
		if _, err := c.Send(ctx, w.GID, bridge.SendRequest{Target: "lead", Message: fmt.Sprintf("r%d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitHeld(t, c, p.GID, 3)
	h := &bridge.Handover{}
	r, err := c.Poll(bridge.WithHandover(ctx, h), p.GID, bridge.PollRequest{Wait: 2 * time.Second, Max: 2}, nil)
	if err != nil || len(r.Messages) != 2 || r.Messages[0].Redelivered {
		t.Fatalf("first poll: %+v %v", r, err)
	}
	if r.Held == nil || r.Held.Total != 1 || r.Held.InFlight != 0 {
		t.Fatalf("the result counts its own messages as in flight: %+v", r.Held)
	}
	if !h.Lease() {
		t.Fatal("a handover with messages leased nothing")
	}
	peek, _ := c.Poll(ctx, p.GID, bridge.PollRequest{Peek: true}, nil)
	if peek.Held == nil || peek.Held.InFlight != 2 || peek.Held.Total != 1 {
		t.Fatalf("another session's peek must say 2 are in flight, 1 held: %+v", peek.Held)
	}
	got := pollUntil(t, c, p.GID, 3) // the third now, the two leased once the lease runs out
	redelivered := 0
	for _, m := range got {
		if m.Redelivered {
			redelivered++
		}
	}
	if redelivered != 2 {
		t.Fatalf("%d of the messages were flagged redelivered, want the 2 leased: %+v", redelivered, got)
	}
	h.Ack() // too late: the lease already gave them back
	if d := tr.Depth(p.GID); d != 0 {
		t.Fatalf("depth %d after all were drained without a handover", d)
	}
}

// TestLeaseAckSettlesAtOnce: evidence within the lease acks the messages;
// nothing comes back, nothing is flagged.
func TestLeaseAckSettlesAtOnce(t *testing.T) {
	c, tr := leaseCore(t, time.Minute)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	w, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker})
	if _, err := c.Send(ctx, w.GID, bridge.SendRequest{Target: "lead", Message: "r"}, nil); err != nil {
		t.Fatal(err)
	}
	h := &bridge.Handover{}
	if r, err := c.Poll(bridge.WithHandover(ctx, h), p.GID, bridge.PollRequest{Wait: 2 * time.Second}, nil); err != nil || len(r.Messages) != 1 {
		t.Fatalf("poll: %+v %v", r, err)
	}
	h.Lease()
	h.Ack()
	h.Return(true) // the first word counts
	if d := tr.Depth(p.GID); d != 0 {
		t.Fatalf("not acked: depth %d", d)
	}
	if r, _ := c.Poll(ctx, p.GID, bridge.PollRequest{Peek: true}, nil); r.Status != bridge.StatusEmpty || r.Held != nil {
		t.Fatalf("acked messages still show: %+v", r)
	}
}

// TestHandedOverWhenStoppedIsReported: a worker is stopped while a call of
// its has a brief out that its client never got. The stop reports what is
// held, not what is out; when the call gives the brief back it must be
// reported to its sender (FAILED, corr its msgId), never dropped with the
// removed inbox.
func TestHandedOverWhenStoppedIsReported(t *testing.T) {
	c, _ := leaseCore(t, time.Minute)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	w, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker})
	sent, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &bridge.Handover{}
	if r, err := c.Poll(bridge.WithHandover(ctx, h), w.GID, bridge.PollRequest{Wait: 2 * time.Second}, nil); err != nil || len(r.Messages) != 1 {
		t.Fatalf("worker's poll: %+v %v", r, err)
	}
	keep := false
	if _, err := c.Stop(ctx, p.GID, bridge.StopRequest{Target: "w", ClosePane: &keep}); err != nil {
		t.Fatal(err)
	}
	h.Settle(false) // the result never reached the worker's client
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		r, err := c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 500 * time.Millisecond, Max: 50}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == sent.MsgID {
				return
			}
		}
	}
	t.Fatal("the brief out to the stopped worker's call was dropped: its sender never heard FAILED")
}
