package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestWaitCapBoundsEveryWait: a call made with WithWaitCap (its MCP
// client's ceiling) waits no longer than the cap even when MaxWait and its
// wait_s are longer, ends pending, and its next step names the cap, not
// MaxWait: a poll and an open send.
func TestWaitCapBoundsEveryWait(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.MaxWait = 30 * time.Second })
	p, w := pair(h)
	ctx := bridge.WithWaitCap(context.Background(), 200*time.Millisecond)

	start := time.Now()
	r, err := h.c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 20 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "capped poll", r, bridge.StatusPending)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the poll waited %v: the 200ms cap did not bound it", took)
	}
	if !strings.Contains(r.Next, "wait_s=0.2") {
		t.Fatalf("poll next %q does not name the caller's cap (wait_s=0.2)", r.Next)
	}

	r, err = h.c.Send(ctx, p.GID, bridge.SendRequest{Target: w.GID, Message: "brief", Wait: 20 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "capped open send", r, bridge.StatusPending)
	if !strings.Contains(r.Next, "wait_s=0.2") {
		t.Fatalf("send next %q does not name the caller's cap (wait_s=0.2)", r.Next)
	}

	// without a cap the same poll is bound by MaxWait alone: an empty
	// poll's next names it
	r, err = h.c.Poll(context.Background(), p.GID, bridge.PollRequest{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != bridge.StatusEmpty || !strings.Contains(r.Next, "wait_s=30") {
		t.Fatalf("uncapped empty poll: %s, next %q (want empty, wait_s=30)", r.Status, r.Next)
	}
}
