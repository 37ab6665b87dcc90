package memnettest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestHeldReceiptSurvivesSenderRestart: a brief queued at a busy pane on
// another host is typed later, and its INJECTED is held for the sender.
// Its ledger entry is settled when it arrives, but the receipt itself is
// still in the sender's inbox (not yet spilled): the copy a restart of the
// sender's gateway hands back must be held again. It was dropped as a
// receipt "with nothing waiting", so the sender never heard its brief was
// typed (the sim's "no receipt" breach under kill and restart).
func TestHeldReceiptSurvivesSenderRestart(t *testing.T) {
	herdr := &busyPane{}
	c := memnettest.New(t)
	slow := func(cfg *bridge.Config) { cfg.SpillDelay = time.Hour } // held in the inbox, not in the store
	a := c.Start("a", slow)
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Injector = herdr; cfg.PaneRecheck = 20 * time.Millisecond })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	if _, _, err := b.Core.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "%1"}); err != nil {
		t.Fatal(err)
	}
	c.Converge(t)
	herdr.setBusy(true)
	second, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "w@b", Message: "second"}, nil)
	if err != nil || second.Status != bridge.StatusQueued {
		t.Fatalf("brief: %+v, %v; want it queued behind the busy agent", second, err)
	}
	herdr.setBusy(false)
	b.Core.PaneStatus("%1", "idle")
	memnettest.Eventually(t, "the brief is typed and its receipt held", func() bool {
		return herdr.typedN() == 1 && heldFor(a, "lead") == 1
	})
	a = c.Restart(a, slow)
	var got []bridge.Message
	memnettest.Eventually(t, "the sender drains the receipt of its queued brief", func() bool {
		res, err := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Max: 10}, nil)
		if err == nil {
			got = append(got, res.Messages...)
		}
		for _, m := range got {
			if m.Kind == bridge.KindInjected && m.Corr == second.MsgID {
				return true
			}
		}
		return false
	})
}

// heldFor is how many messages name holds on h.
func heldFor(h *memnettest.Host, name string) int {
	for _, e := range h.Core.Roster().Entities {
		if e.Name == name {
			return e.Held
		}
	}
	return -1
}

// busyPane is a fake herdr whose agent is busy (the brief waits in the
// pane's queue) until told otherwise; then it types and submits.
type busyPane struct {
	mu    sync.Mutex
	busy  bool
	typed int
}

func (p *busyPane) setBusy(b bool) { p.mu.Lock(); p.busy = b; p.mu.Unlock() }
func (p *busyPane) typedN() int    { p.mu.Lock(); defer p.mu.Unlock(); return p.typed }

func (p *busyPane) Inject(_ context.Context, b bridge.Brief) bridge.InjectReceipt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy {
		return bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: "working", Reason: "w is working"}
	}
	if err := b.Typing(); err != nil {
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: err.Error()}
	}
	p.typed++
	return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
}

func (p *busyPane) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}
