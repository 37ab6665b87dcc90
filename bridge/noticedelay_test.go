package bridge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
)

// delayHarness is a core on a network link whose sender's inbox can be
// filled: one delivery in flight (Prefetch 1), one waiting (cap 1),
// nothing spilled to the store meanwhile. delay says whether the network
// has the delay exchange (bridge.delay). The real exchange does not run
// here (the RabbitMQ plugin is not installed, LavinMQ is not either):
// memnet's implements what the broker's does.
func delayHarness(t *testing.T, delay bool) (*harness, *memnet.Network, *memnet.Transport) {
	t.Helper()
	net := memnet.New(memnet.Options{Delay: delay})
	link := net.Connect()
	t.Cleanup(func() { _ = link.Close(); net.Close() })
	h := newHarness(t, func(c *bridge.Config) {
		c.Transport = link
		c.MessageTTL = time.Hour
		c.Prefetch, c.InboxMaxLength, c.SpillDelay = 1, 1, time.Hour
		c.NoticeDelay = 500 * time.Millisecond
	})
	return h, net, link
}

// refuseNotices leaves idle holding one brief from sender, fills sender's
// inbox with messages that outlive the brief, then expires the brief: the
// FAILED for it is refused by sender's full inbox, and kept.
func refuseNotices(t *testing.T, h *harness, link *memnet.Transport, sender, idle bridge.Entity) (brief string) {
	t.Helper()
	brief = h.send(sender, bridge.SendRequest{Target: "idle", Message: "a brief that expires"}).MsgID
	h.heldFor("idle", 1)
	// full once it still refuses after a pause: the core moves what it
	// holds into its store meanwhile (spill.go), which makes room once
	refusedInARow := 0
	eventually(t, "sender's inbox is full", func() bool {
		env := h.rawEnv(bridge.KindSend, idle.GID, sender.GID, "filler")
		env.ExpiresAt = h.clk.Now().Add(100 * time.Hour)
		err := link.Publish(context.Background(), sender.GID, env, true)
		if err != nil && !errors.Is(err, bridge.ErrInboxFull) {
			t.Fatalf("filling sender's inbox: %v", err)
		}
		if err == nil {
			refusedInARow = 0
			return false
		}
		refusedInARow++
		time.Sleep(300 * time.Millisecond)
		return refusedInARow == 3
	})
	h.clk.Advance(2 * time.Hour) // the brief expires: FAILED to sender, whose inbox refuses it
	eventually(t, "idle's brief expired", func() bool { v, _ := h.view("idle"); return v.Held == 0 })
	return brief
}

// failedSeen polls sender until it was told FAILED about brief, or for
// `within`; it returns how many times it was told.
func failedSeen(t *testing.T, h *harness, sender bridge.Entity, brief string, within time.Duration) int {
	t.Helper()
	n := 0
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		res, err := h.c.Poll(context.Background(), sender.GID, bridge.PollRequest{Max: 10, Wait: 200 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == brief {
				n++
			}
		}
	}
	return n
}

// TestNoticeRetryOutlivesGateway: a FAILED the sender's full inbox refuses
// is kept in memory for a retry — and, where the broker has bridge.delay,
// handed to it too (noticedelay.go). The gateway dies before its retry
// goes out; after its restart the sender drains its inbox and the
// broker's delayed copy brings the FAILED. Before, the notice died with
// the process and the sender never heard what became of its brief.
func TestNoticeRetryOutlivesGateway(t *testing.T) {
	h, net, link := delayHarness(t, true)
	idle := h.reg("idle", bridge.RolePrimary)
	sender := h.reg("sender", bridge.RolePrimary)
	brief := refuseNotices(t, h, link, sender, idle)
	eventually(t, "the FAILED handed to bridge.delay twice", func() bool { n, _ := net.Delayed(); return n == 2 })

	h.restart() // the in-memory retry is gone with the old core
	if n := failedSeen(t, h, sender, brief, 8*time.Second); n != 1 {
		t.Fatalf("after the gateway restarted, the sender was told FAILED about its brief %d times, want once", n)
	}
}

// TestNoticeDelayedCopyDeduplicated: with the gateway alive, the in-memory
// retry and both delayed copies of the FAILED all reach the sender's
// inbox; the sender is told once.
func TestNoticeDelayedCopyDeduplicated(t *testing.T) {
	h, net, link := delayHarness(t, true)
	idle := h.reg("idle", bridge.RolePrimary)
	sender := h.reg("sender", bridge.RolePrimary)
	brief := refuseNotices(t, h, link, sender, idle)
	eventually(t, "the FAILED handed to bridge.delay twice", func() bool { n, _ := net.Delayed(); return n == 2 })
	if n := failedSeen(t, h, sender, brief, 7*time.Second); n != 1 {
		t.Fatalf("the sender was told FAILED about its brief %d times, want once", n)
	}
	if _, d := net.Delayed(); d != 0 {
		t.Fatalf("%d delayed copies not yet due after the test's wait", d)
	}
}

// TestNoticeDelayOffInert: on a broker without the delay exchange nothing
// is handed to it; the in-memory retry alone tells the sender, as before.
func TestNoticeDelayOffInert(t *testing.T) {
	h, net, link := delayHarness(t, false)
	if s := bridge.DelayOf(link); s.On || s.Reason != "no x-delayed-message on this broker" {
		t.Fatalf("delay state of a network without it: %+v", s)
	}
	idle := h.reg("idle", bridge.RolePrimary)
	sender := h.reg("sender", bridge.RolePrimary)
	brief := refuseNotices(t, h, link, sender, idle)
	if n := failedSeen(t, h, sender, brief, 3*time.Second); n != 1 {
		t.Fatalf("the sender was told FAILED about its brief %d times, want once", n)
	}
	if n, _ := net.Delayed(); n != 0 {
		t.Fatalf("%d messages handed to a delay exchange the broker does not have", n)
	}
}
