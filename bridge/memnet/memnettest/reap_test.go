package memnettest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestReapAcrossHosts: an idle entity shows stale in the other host's
// roster too, and when its gateway reaps it, a sender on another host hears
// FAILED with the reason (signed by that gateway, accepted here).
func TestReapAcrossHosts(t *testing.T) {
	c := memnettest.New(t)
	staleOnly := func(cfg *bridge.Config) { cfg.StaleAfter, cfg.ReapAfter = 200*time.Millisecond, -1 }
	a := c.Start("a", staleOnly)
	b := c.Start("b")
	idle := a.Register(t, "idle", bridge.RolePrimary)
	a.Core.Attach(idle.GID) // active until the message is held
	sender := b.Register(t, "sender", bridge.RolePrimary)
	c.Converge(t)
	res, err := b.Core.Send(ctx, sender.GID, bridge.SendRequest{Target: "idle@a", Message: "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	memnettest.Eventually(t, "idle holds the message", func() bool {
		h, _ := a.Core.Held(idle.GID)
		return h.Total == 1
	})
	a.Core.Detach(idle.GID)
	memnettest.Eventually(t, "b sees idle@a stale", func() bool {
		for _, e := range b.Core.Roster().Entities {
			if e.Name == "idle" && e.Host == "a" {
				return e.Status == bridge.StatusStale
			}
		}
		return false
	})

	a = c.Restart(a, func(cfg *bridge.Config) { cfg.StaleAfter, cfg.ReapAfter = 200*time.Millisecond, time.Second })
	memnettest.Eventually(t, "idle reaped", func() bool { _, ok := a.Core.Entity(idle.GID); return !ok })
	var got []bridge.Message
	memnettest.Eventually(t, "sender hears FAILED", func() bool {
		r, err := b.Core.Poll(ctx, sender.GID, bridge.PollRequest{Wait: 200 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Messages...)
		return len(got) > 0
	})
	if m := got[0]; len(got) != 1 || m.Kind != bridge.KindFailed || m.Corr != res.MsgID || !strings.Contains(m.Body, "idle@a was removed after") {
		t.Fatalf("sender got %+v", got)
	}
}
