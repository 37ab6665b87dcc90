package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func bodiesOf(ms []bridge.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Body)
	}
	return out
}

// A message held past the cap moves to the store as soon as the store has
// room again, before any later one: after a restart (the store's records
// first, then the inbox's redelivery) the drain keeps arrival order.
func TestHeldOrderSurvivesRestartPastTheCap(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 4; c.InboxMaxLength = 3 })
	p, w := pair(h)
	for i := range 4 { // r0..r2 go to the store, r3 is over the cap: stays unacked in the inbox
		h.send(w, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("r%d", i)})
		h.heldFor("p", i+1)
	}
	eventually(t, "3 stored", func() bool { return storedHeld(h) == 3 })
	got := h.poll(p, bridge.PollRequest{Max: 3})
	if b := bodiesOf(got.Messages); fmt.Sprint(b) != "[r0 r1 r2]" {
		t.Fatalf("first drain %v", b)
	}
	h.send(w, bridge.SendRequest{Target: "p", Message: "r4"}) // room again: r3, then r4, move to the store
	h.heldFor("p", 2)
	eventually(t, "r3 and r4 stored", func() bool { return storedHeld(h) == 2 })
	h.restart()
	h.heldFor("p", 2)
	got = h.poll(p, bridge.PollRequest{Max: 10})
	if b := bodiesOf(got.Messages); fmt.Sprint(b) != "[r3 r4]" {
		t.Fatalf("drain after restart %v, want [r3 r4] (arrival order)", b)
	}
}

// A message taken by a waiting poll holds back the ones after it until the
// call settles it or lets it go (its result never reached the client):
// then it is written first, and a restart keeps arrival order.
func TestHeldOrderSurvivesRestartAfterUnclaim(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	ho := &bridge.Handover{}
	pl := async(func() (*bridge.Result, error) {
		return h.c.Poll(bridge.WithHandover(context.Background(), ho), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	})
	h.waitingOn("p")
	h.send(w, bridge.SendRequest{Target: "p", Message: "A"})
	if o := <-pl; o.err != nil || len(o.res.Messages) != 1 {
		t.Fatalf("poll: %+v %v", o.res, o.err)
	}
	h.send(w, bridge.SendRequest{Target: "p", Message: "B"})
	h.heldFor("p", 1) // B; A is claimed
	if n := storedHeld(h); n != 0 {
		t.Fatalf("B written (%d records) while A, before it, was still claimed", n)
	}
	ho.Settle(false) // the result never reached the client: A back to held, written before B
	eventually(t, "A and B stored", func() bool { return storedHeld(h) == 2 })
	h.restart()
	h.heldFor("p", 2)
	got := h.poll(p, bridge.PollRequest{Max: 10})
	if b := bodiesOf(got.Messages); fmt.Sprint(b) != "[A B]" {
		t.Fatalf("drain after restart %v, want [A B] (arrival order)", b)
	}
}

// Messages held past the cap move to the store once it has room again, so
// they never pile up in the prefetch window: a filtered drain still sees a
// message behind them.
func TestHeldPastTheCapMoveWhenRoomOpens(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 2; c.InboxMaxLength = 3 })
	p := h.reg("p", bridge.RolePrimary)
	a, b, quiet := h.reg("a", bridge.RoleWorker), h.reg("b", bridge.RoleWorker), h.reg("quiet", bridge.RoleWorker)
	for round := range 2 {
		nb := 3 - round // to the cap, into the store
		for i := range nb {
			h.send(b, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("b%d.%d", round, i)})
			h.heldFor("p", round+i+1)
		}
		h.send(a, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("a%d", round)}) // over the cap: stays in the inbox
		h.heldFor("p", 4)
		if got := h.poll(p, bridge.PollRequest{Target: "b", Max: nb}); len(got.Messages) != nb {
			t.Fatalf("drain of b: %v", bodiesOf(got.Messages))
		}
	}
	eventually(t, "a0 and a1 moved to the store", func() bool { return storedHeld(h) == 2 })
	h.send(quiet, bridge.SendRequest{Target: "p", Message: "the one you want"})
	got := h.poll(p, bridge.PollRequest{Target: "quiet", Wait: time.Second})
	if len(got.Messages) != 1 {
		t.Fatalf("poll(target=quiet) got %v with 2 held and 0 in the store (cap 3); inbox depth %d", bodiesOf(got.Messages), h.tr.Depth(p.GID))
	}
}
