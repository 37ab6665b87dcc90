package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestRemovalDoesNotWaitForAStalledReader: a worker's poll hands three
// messages to a client that does not read them (a stalled reader), and
// the worker is removed. The removal returns while the call still holds
// them, and the call decides their fate: read, they are delivered and
// nobody hears FAILED; given back, each sender hears FAILED once, with its
// dead-letter line. Then the inbox goes. Before, the removal waited out its
// whole 30 s drain bound for the call (sim seed 1268629591247927153,
// faults abandon,stall,stop,remove,restart: 4 of 300 schedules), because
// the transport counts the copies a call holds as waiting in the inbox.
func TestRemovalDoesNotWaitForAStalledReader(t *testing.T) {
	for _, read := range []bool{true, false} {
		t.Run(fmt.Sprintf("read=%v", read), func(t *testing.T) {
			h := newHarness(t, nil)
			ctx := context.Background()
			w := h.reg("w", bridge.RoleWorker)
			s := h.reg("s", bridge.RolePrimary)
			f := newFates()
			for i := range 3 {
				f.accept(h.send(s, bridge.SendRequest{Target: "w", Message: fmt.Sprintf("m%d", i)}).MsgID, s.Name)
			}
			h.heldFor("w", 3)
			ho := &bridge.Handover{}
			r, err := h.c.Poll(bridge.WithHandover(ctx, ho), w.GID, bridge.PollRequest{}, nil)
			if err != nil || len(r.Messages) != 3 {
				t.Fatalf("poll: %v, %+v", err, r)
			}
			removed := make(chan error, 1)
			go func() { removed <- h.c.Remove(ctx, w.GID) }()
			select {
			case err := <-removed:
				if err != nil {
					t.Fatalf("remove: %v", err)
				}
			case <-time.After(20 * time.Second): // the drain bound is 30 s
				t.Fatal("the removal is still waiting for the call that holds the worker's messages")
			}
			if !h.tr.HasInbox(w.GID) {
				t.Fatal("the inbox went while a call still held its messages")
			}
			if read {
				ho.Settle(true)
				for _, m := range r.Messages {
					f.deliver(m.MsgID)
				}
			} else {
				ho.Return(false)
			}
			eventually(t, "the removal finished: the inbox is gone", func() bool { return !h.tr.HasInbox(w.GID) })
			collectReports(t, h, s, f)
			f.check(t)
			if want := map[bool]int{true: 0, false: 3}[read]; len(f.reported) != want {
				t.Fatalf("reported %d, want %d", len(f.reported), want)
			}
			if read {
				return
			}
			deads, err := h.st.DeadLetters(100)
			if err != nil {
				t.Fatal(err)
			}
			lines := 0
			for _, d := range deads {
				if f.reported[d.MsgID] > 0 {
					lines++
				}
			}
			if lines != 3 {
				t.Fatalf("%d dead-letter lines for the 3 reported messages: %+v", lines, deads)
			}
		})
	}
}

// redeliverer records each inbox's consumer handler and what it was
// handed, so a test can hand a copy back as a broker does after a
// consumer bounce (a link drop while a call holds the message).
type redeliverer struct {
	bridge.Transport
	mu      sync.Mutex
	handler map[string]func(bridge.Delivery)
	seen    map[string]bridge.Delivery // by msgId
}

func (r *redeliverer) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	return r.Transport.Consume(ctx, gid, prefetch, func(d bridge.Delivery) {
		r.mu.Lock()
		r.handler[gid] = h
		if d.Env != nil {
			r.seen[d.Env.MsgID] = d
		}
		r.mu.Unlock()
		h(d)
	})
}

// redeliver hands the copy of msgID to gid's consumer again, redelivered,
// with acker.
func (r *redeliverer) redeliver(gid, msgID string, acker bridge.Acker) {
	r.mu.Lock()
	h, d := r.handler[gid], r.seen[msgID]
	r.mu.Unlock()
	d.Redelivered, d.Acker = true, acker
	h(d)
}

// redeliverHarness is newHarness over a redeliverer.
func redeliverHarness(t *testing.T) (*harness, *redeliverer) {
	var tr *redeliverer
	h := newHarness(t, func(c *bridge.Config) {
		tr = &redeliverer{Transport: c.Transport, handler: map[string]func(bridge.Delivery){}, seen: map[string]bridge.Delivery{}}
		c.Transport = tr
	})
	return h, tr
}

// oneHeldMessage registers a worker w and a primary s, and has w hold one
// message from s: its msgId, accepted in f.
func oneHeldMessage(h *harness) (w, s bridge.Entity, f *fates, id string) {
	w = h.reg("w", bridge.RoleWorker)
	s = h.reg("s", bridge.RolePrimary)
	f = newFates()
	id = h.send(s, bridge.SendRequest{Target: "w", Message: "m"}).MsgID
	f.accept(id, s.Name)
	h.heldFor("w", 1)
	return w, s, f, id
}

// countingAcker counts its acks and rejections.
type countingAcker struct{ acks, rejects atomic.Int32 }

func (a *countingAcker) Ack() error          { a.acks.Add(1); return nil }
func (a *countingAcker) Reject(string) error { a.rejects.Add(1); return nil }

// TestCopyOfAMessageACallHoldsIsNotReported: the transport hands back a
// copy of a message a call still holds after its entity was removed (a
// consumer bounce). The copy is swapped in for the call to settle, not
// reported: reported, a message the call then hands over would have two
// fates. It was: an arrival for a removed entity was always reported.
func TestCopyOfAMessageACallHoldsIsNotReported(t *testing.T) {
	h, tr := redeliverHarness(t)
	ctx := context.Background()
	w, s, f, id := oneHeldMessage(h)
	ho := &bridge.Handover{}
	r, err := h.c.Poll(bridge.WithHandover(ctx, ho), w.GID, bridge.PollRequest{}, nil)
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("poll: %v, %+v", err, r)
	}
	if err := h.c.Remove(ctx, w.GID); err != nil {
		t.Fatalf("remove: %v", err)
	}
	copyAcker := &countingAcker{}
	tr.redeliver(w.GID, id, copyAcker)
	ho.Settle(true)
	f.deliver(id)
	collectReports(t, h, s, f)
	f.check(t)
	if n := copyAcker.acks.Load(); n != 1 {
		t.Fatalf("the copy the call settled was acked %d times, want 1", n)
	}
}

// TestCopyOfAMessageTakenBeforeTheRemovalIsNotReported: a worker drains a
// message, is removed, and its removal finishes; then the transport hands
// a copy of that message back (a broker cut made the drain's ack void, and
// the broker queue is emptied into the old handler when the link returns).
// The seen-set knows the entity took it: the copy is acked, not reported.
// It was reported FAILED — the message's second fate (sim seed
// 7483111141784372565, faults abandon,stall,cut,stop,remove).
func TestCopyOfAMessageTakenBeforeTheRemovalIsNotReported(t *testing.T) {
	h, tr := redeliverHarness(t)
	w, s, f, id := oneHeldMessage(h)
	if r := h.poll(w, bridge.PollRequest{}); len(r.Messages) != 1 {
		t.Fatalf("poll: %+v", r)
	}
	f.deliver(id)
	if err := h.c.Remove(context.Background(), w.GID); err != nil {
		t.Fatalf("remove: %v", err)
	}
	eventually(t, "the removal finished: the inbox is gone", func() bool { return !h.tr.HasInbox(w.GID) })
	copyAcker := &countingAcker{}
	tr.redeliver(w.GID, id, copyAcker)
	collectReports(t, h, s, f)
	f.check(t)
	if n := copyAcker.acks.Load(); n != 1 {
		t.Fatalf("the copy was acked %d times, want 1", n)
	}
}
