package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
)

// TestNoticeKeptWhileLinkDown: a gateway on a bare network link (no
// outbox in front of it) expires two held briefs while its link is down,
// so the FAILED for each cannot be published to its sender. Before,
// publishAll logged "notice not delivered" and the sender never heard;
// now the notices are kept (noticeretry.go) and the sweeper publishes them
// once the link is back. The conservation simulator found it under
// cut,pane faults (seed 3101738088149954073): the FAILEDs of a pane closed
// on a cut gateway were lost the same way.
func TestNoticeKeptWhileLinkDown(t *testing.T) {
	link := memnet.New(memnet.Options{}).Connect()
	t.Cleanup(func() { _ = link.Close() })
	h := newHarness(t, func(c *bridge.Config) {
		c.Transport = link
		c.MessageTTL = time.Hour
	})
	h.reg("idle", bridge.RolePrimary)
	sender := h.reg("sender", bridge.RolePrimary)
	h.c.Attach(sender.GID)
	defer h.c.Detach(sender.GID)
	briefs := map[string]bool{}
	for _, m := range []string{"first", "second"} {
		briefs[h.send(sender, bridge.SendRequest{Target: "idle", Message: m}).MsgID] = true
	}
	h.heldFor("idle", 2)

	link.LinkDown()
	h.clk.Advance(2 * time.Hour) // the briefs expire: FAILED to the sender, who is unreachable
	eventually(t, "idle's briefs expired", func() bool { v, _ := h.view("idle"); return v.Held == 0 })
	time.Sleep(11 * time.Second) // past publishAll's 10 s bound: the first publish gave up
	link.LinkUp()

	told := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(told) < len(briefs) && time.Now().Before(deadline) {
		res, err := h.c.Poll(context.Background(), sender.GID, bridge.PollRequest{Max: 10, Wait: 200 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			if m.Kind == bridge.KindFailed && briefs[m.Corr] {
				told[m.Corr] = true
			}
		}
	}
	if len(told) != len(briefs) {
		t.Fatalf("the sender was told FAILED about %d of %d briefs that expired while the link was down", len(told), len(briefs))
	}
}
