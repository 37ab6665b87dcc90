package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// sendN has from send n replies "<prefix> i" to target.
func sendN(h *harness, from bridge.Entity, target, prefix string, n int) {
	h.t.Helper()
	for i := range n {
		h.send(from, bridge.SendRequest{Target: target, Message: fmt.Sprintf("%s %d", prefix, i)})
	}
}

// heldInStore has w send n replies "r i" to p and waits until p holds them
// all and its inbox moved them to the store.
func heldInStore(h *harness, p, w bridge.Entity, n int) {
	h.t.Helper()
	sendN(h, w, p.Name, "r", n)
	h.heldFor(p.Name, n)
	spilled(h, p.GID)
}

// storedHeld counts the held records in the store.
func storedHeld(h *harness) int {
	h.t.Helper()
	n := 0
	if err := h.st.EachHeld(func(string, uint64, []byte) error { n++; return nil }); err != nil {
		h.t.Fatalf("EachHeld: %v", err)
	}
	return n
}

// spilled waits until gid's inbox is empty: everything held was moved to
// the store and acked there.
func spilled(h *harness, gid string) {
	h.t.Helper()
	eventually(h.t, "inbox moved to the store", func() bool { return h.tr.Depth(gid) == 0 })
}

// A filtered drain finds a quiet worker's reply behind a backlog from a
// chatty one many times the prefetch window (issue: the window hid it).
func TestFilteredDrainSeesPastThePrefetchWindow(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 8 })
	p := h.reg("p", bridge.RolePrimary)
	chatty, quiet := h.reg("chatty", bridge.RoleWorker), h.reg("quiet", bridge.RoleWorker)
	sendN(h, chatty, "p", "noise", 300)
	h.send(quiet, bridge.SendRequest{Target: "p", Message: "the one you want"})
	h.heldFor("p", 301)
	spilled(h, p.GID)
	got := h.poll(p, bridge.PollRequest{Target: "quiet"})
	if len(got.Messages) != 1 || got.Messages[0].Body != "the one you want" {
		t.Fatalf("poll(target=quiet) behind 300 from chatty: %+v", got.Messages)
	}
	got = h.poll(p, bridge.PollRequest{Target: "chatty", Max: 500})
	if len(got.Messages) != 300 {
		t.Fatalf("poll(target=chatty) got %d, want 300", len(got.Messages))
	}
	for i, m := range got.Messages {
		if want := fmt.Sprintf("noise %d", i); m.Body != want {
			t.Fatalf("message %d is %q, want %q: arrival order lost", i, m.Body, want)
		}
	}
	if n := storedHeld(h); n != 0 {
		t.Fatalf("%d records left in the store after everything was drained", n)
	}
}

// Held messages moved to the store outlive the core: after a restart they
// are held again, once each, in order; drained, they are gone for good.
func TestHeldMessagesSurviveRestartFromTheStore(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	heldInStore(h, p, w, 30)
	peek := h.poll(p, bridge.PollRequest{Peek: true, Max: 5})
	if len(peek.Messages) != 5 || peek.Messages[0].Body != "r 0" || peek.Messages[0].FromName != "w" {
		t.Fatalf("peek read from the store: %+v", peek.Messages)
	}

	h.restart()
	h.heldFor("p", 30)
	got := h.poll(p, bridge.PollRequest{Max: 50})
	if len(got.Messages) != 30 || got.Messages[0].Body != "r 0" || got.Messages[29].Body != "r 29" {
		t.Fatalf("drain after the restart: %d messages %+v", len(got.Messages), got.Messages)
	}
	h.restart()
	h.heldFor("p", 0)
	if n := storedHeld(h); n != 0 {
		t.Fatalf("%d drained records came back after a restart", n)
	}
}

// Past InboxMaxLength held, the gateway stops moving messages out of the
// inbox: the rest waits there, where the inbox's own cap acts, and is
// drained once room is made. Nothing is lost at the boundary.
func TestHeldCapLeavesTheRestInTheInbox(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 4; c.InboxMaxLength = 10 })
	p, w := pair(h)
	for i := range 20 { // paced: a burst faster than the store could meet the inbox's cap first
		h.send(w, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("r %d", i)})
		h.heldFor("p", min(i+1, 14)) // 10 in the store, then the 4 of the prefetch window
	}
	if n, d := storedHeld(h), h.tr.Depth(p.GID); n != 10 || d != 10 {
		t.Fatalf("%d records in the store (want the cap, 10), %d in the inbox (want 4 unacked + 6 waiting)", n, d)
	}
	var bodies []string
	eventually(t, "all 20 drained", func() bool {
		for _, m := range h.poll(p, bridge.PollRequest{Max: 50}).Messages {
			bodies = append(bodies, m.Body)
		}
		return len(bodies) >= 20
	})
	for i, b := range bodies {
		if want := fmt.Sprintf("r %d", i); b != want {
			t.Fatalf("drained %d: %q, want %q (%d in all)", i, b, want, len(bodies))
		}
	}
}

// Removing an entity deletes what the store held for it.
func TestRemoveDropsHeldRecords(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	heldInStore(h, p, w, 5)
	if n := storedHeld(h); n != 5 {
		t.Fatalf("%d records stored, want 5", n)
	}
	if err := h.c.Remove(context.Background(), p.GID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if n := storedHeld(h); n != 0 {
		t.Fatalf("%d records left for a removed entity", n)
	}
}

// A held message drained within SpillDelay is never written to the store
// (the reply path pays no store write); one left longer is written and
// acked in its inbox.
func TestSpillWaitsSpillDelay(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.SpillDelay = time.Hour })
	p, w := pair(h)
	sendN(h, w, "p", "quick", 3)
	h.heldFor("p", 3)
	if d := h.tr.Depth(p.GID); d != 3 {
		t.Fatalf("inbox depth %d within SpillDelay, want 3 (still unwritten, unacked)", d)
	}
	if got := h.poll(p, bridge.PollRequest{Max: 5}); len(got.Messages) != 3 {
		t.Fatalf("drain: %+v", got.Messages)
	}
	if n := storedHeld(h); n != 0 {
		t.Fatalf("%d records written for messages drained within SpillDelay", n)
	}

	h2 := newHarness(t, func(c *bridge.Config) { c.SpillDelay = 20 * time.Millisecond })
	p2, w2 := pair(h2)
	heldInStore(h2, p2, w2, 3) // written once they waited: the inbox empties
	if n := storedHeld(h2); n != 3 {
		t.Fatalf("%d records in the store, want 3", n)
	}
}

// Messages drained within SpillDelay are no backlog: a steady send+poll
// loop never writes the message in flight to the store (it did once every
// eagerAt round trips, counting the drained ones still queued: two commits,
// four fdatasyncs, for nothing).
func TestDrainedMessagesAreNoBacklog(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.SpillDelay, c.Prefetch = time.Hour, 8 }) // a backlog at 4 queued
	p, w := pair(h)
	for i := range 24 {
		h.send(w, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("rt %d", i)})
		h.heldFor("p", 1)
		time.Sleep(30 * time.Millisecond) // a spill would have been written by now
		if d := h.tr.Depth(p.GID); d != 1 {
			t.Fatalf("round trip %d: inbox depth %d before the drain, want 1: the message in flight was written to the store as a backlog", i, d)
		}
		if got := h.poll(p, bridge.PollRequest{Max: 5}); len(got.Messages) != 1 {
			t.Fatalf("round trip %d: drained %+v", i, got.Messages)
		}
	}
}
