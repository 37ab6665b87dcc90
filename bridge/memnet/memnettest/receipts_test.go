package memnettest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// panes is a fake herdr: what typing a brief into each pane observes.
type panes struct {
	mu     sync.Mutex
	result map[string]bridge.InjectReceipt // by pane id
	typed  []bridge.Brief
}

func (p *panes) Inject(_ context.Context, b bridge.Brief) bridge.InjectReceipt {
	if err := b.Typing(); err != nil {
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: err.Error()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.typed = append(p.typed, b)
	return p.result[b.To.PaneID]
}

func (p *panes) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}

func (p *panes) briefs() []bridge.Brief {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bridge.Brief(nil), p.typed...)
}

// TestReceiptsAcrossHosts: a brief into a worker in a pane on another host
// reports the rung the far gateway observed (INJECTED with submitted), or
// its FAILED with the reason; never more than was observed.
func TestReceiptsAcrossHosts(t *testing.T) {
	herdr := &panes{result: map[string]bridge.InjectReceipt{
		"%1": {Status: bridge.StatusSubmitted},
		"%2": {Status: bridge.StatusFailed, Reason: "the pane is gone"},
		"%3": {Status: bridge.StatusUncertain, Reason: "typed, no turn seen"},
	}}
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Injector = herdr })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	for i, name := range []string{"w1", "w2", "w3"} {
		if _, _, err := b.Core.Register(ctx, bridge.RegisterRequest{Name: name, Role: bridge.RoleWorker, PaneID: fmt.Sprintf("%%%d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	c.Converge(t)
	for _, tc := range []struct{ target, status, reason string }{
		{"w1@b", bridge.StatusSubmitted, ""},
		{"w2@b", bridge.StatusFailed, "the pane is gone"},
		{"w3@b", bridge.StatusUncertain, "typed, no turn seen"},
	} {
		r, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: tc.target, Message: "brief for " + tc.target}, nil)
		if err != nil {
			t.Fatal(err)
		}
		why := r.Reason // a FAILED's why is its notice, in messages (data: it may quote the brief)
		if r.Status == bridge.StatusFailed && len(r.Messages) == 1 {
			why = r.Messages[0].Body
		}
		if r.Status != tc.status || !strings.Contains(why, tc.reason) {
			t.Errorf("brief to %s: %s %q, want %s %q", tc.target, r.Status, why, tc.status, tc.reason)
		}
	}
	typed := herdr.briefs()
	if len(typed) != 3 {
		t.Fatalf("%d briefs typed, want 3", len(typed))
	}
	for _, br := range typed {
		if br.FromName != "lead@a" || br.Env.From != lead.GID || br.Env.Host != "a" {
			t.Errorf("typed brief: from %q (%s on %s)", br.FromName, br.Env.From, br.Env.Host)
		}
	}
	// nothing was held for the sender: each receipt resolved its call
	if held, _ := a.Core.Held(lead.GID); held.Total != 0 {
		t.Errorf("held for lead after the receipts: %+v", held)
	}
}
