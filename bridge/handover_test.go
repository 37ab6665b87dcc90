package bridge_test

import (
	"context"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestHandoverAcksOnlyWhenWritten: messages a poll hands over are acked
// only when the transport settles the handover delivered; otherwise they
// are held again, and nothing is lost or doubled.
func TestHandoverAcksOnlyWhenWritten(t *testing.T) {
	inj := &fakeInjector{}
	c := forwardCore(t, inj, false)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	w, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker})
	if _, err := c.Send(ctx, w.GID, bridge.SendRequest{Target: "lead", Message: "r1"}, nil); err != nil {
		t.Fatal(err)
	}
	depth := func() int { return inj.tr.Depth(p.GID) }

	lost := &bridge.Handover{}
	r, err := c.Poll(bridge.WithHandover(ctx, lost), p.GID, bridge.PollRequest{Wait: 2e9}, nil)
	if err != nil || r.Status != bridge.StatusDrained {
		t.Fatalf("poll: %+v %v", r, err)
	}
	if depth() != 1 {
		t.Fatalf("acked before the result was written: depth %d", depth())
	}
	if again, _ := c.Poll(ctx, p.GID, bridge.PollRequest{Peek: true}, nil); again.Status != bridge.StatusEmpty {
		t.Fatalf("a message handed over is still visible: %+v", again)
	}
	lost.Settle(false) // the write failed: back to held
	ok := &bridge.Handover{}
	r, err = c.Poll(bridge.WithHandover(ctx, ok), p.GID, bridge.PollRequest{}, nil)
	if err != nil || r.Status != bridge.StatusDrained || r.Messages[0].Body != "r1" {
		t.Fatalf("after a failed write the message must be drained again: %+v %v", r, err)
	}
	ok.Settle(true)
	if depth() != 0 {
		t.Fatalf("not acked after a delivered write: depth %d", depth())
	}
	if r, _ := c.Poll(ctx, p.GID, bridge.PollRequest{}, nil); r.Status != bridge.StatusEmpty {
		t.Fatalf("delivered twice: %+v", r)
	}
}
