package memnettest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestBriefAndReplyAcrossHosts: a primary on A briefs a pull-mode worker
// on B and waits; the worker's reply resolves the open send. Then the
// worker asks and is answered across hosts, and an ask nobody waits for
// is answered NO_WAITER by the asker's counterpart's gateway.
func TestBriefAndReplyAcrossHosts(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	lead := a.Register(t, "lead", bridge.RolePrimary)
	w := b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)

	sent := sendAsync(a, lead.GID, bridge.SendRequest{Target: "w@b", Message: "cross-host brief", Wait: memnettest.MaxWait})
	held := drainUntil(t, b, w.GID, "cross-host brief")
	got := held[0]
	if len(held) != 1 || got.FromName != "lead@a" || got.Kind != bridge.KindSend || got.From != lead.GID {
		t.Fatalf("brief as the worker sees it: %+v", got)
	}
	r, err := b.Core.Send(ctx, w.GID, bridge.SendRequest{Target: "lead@a", Message: "done across"}, nil)
	if err != nil || r.Status != bridge.StatusConfirmed {
		t.Fatalf("reply: %+v %v", r, err)
	}
	if res := sent.wait(t); res.Status != bridge.StatusReplied || len(res.Messages) != 1 || res.Messages[0].Body != "done across" || res.TraceID != r.TraceID {
		t.Fatalf("open send: %+v (reply trace %s)", res, r.TraceID)
	}

	// ask → answer across hosts
	sent = sendAsync(a, lead.GID, bridge.SendRequest{Target: "w", Message: "next", Wait: memnettest.MaxWait})
	drainUntil(t, b, w.GID, "next")
	asked := askAsync(b, w.GID, bridge.AskRequest{Question: "which one?"})
	res := sent.wait(t)
	if res.Status != bridge.StatusAsked || res.TurnID == "" {
		t.Fatalf("send while the worker asks: %+v", res)
	}
	if r, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "w", Message: "this one", TurnID: res.TurnID}, nil); err != nil || r.Status != bridge.StatusDelivered {
		t.Fatalf("answer: %+v %v", r, err)
	}
	if r := asked.wait(t); r.Status != bridge.StatusAnswered || r.Messages[0].Body != "this one" {
		t.Fatalf("ask: %+v", r)
	}
	// nobody waits on A: NO_WAITER, at once
	if r, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{Question: "anyone?", Target: "lead@a"}, nil); err != nil || r.Status != bridge.StatusNoWaiter {
		t.Fatalf("ask with no waiter: %+v %v", r, err)
	}
}

// TestBroadcastAcrossHosts: one publish reaches every bound inbox on every
// host but the sender's; a group broadcast reaches only the group.
func TestBroadcastAcrossHosts(t *testing.T) {
	c := memnettest.New(t, "a", "b", "c")
	hs := c.Hosts()
	a, b, hc := hs[0], hs[1], hs[2]
	lead := a.Register(t, "lead", bridge.RolePrimary)
	peer := a.Register(t, "peer", bridge.RolePrimary, "build")
	wb := b.Register(t, "wb", bridge.RoleWorker, "build")
	xc := hc.Register(t, "xc", bridge.RoleWorker)
	c.Converge(t)

	for _, g := range []string{"", "build"} {
		if r, err := a.Core.Broadcast(ctx, lead.GID, bridge.BroadcastRequest{Message: "to " + g, Group: g}); err != nil || r.Status != bridge.StatusConfirmed {
			t.Fatalf("broadcast %q: %+v %v", g, r, err)
		}
	}
	// a fence behind the broadcasts in every inbox, from the same sender:
	// one publisher's order holds, so what has not come before it never will
	for _, e := range []bridge.Entity{peer, wb, xc} {
		if _, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: e.Addr(), Message: "fence"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Core.Send(ctx, peer.GID, bridge.SendRequest{Target: "lead", Message: "fence"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		h    *memnettest.Host
		e    bridge.Entity
		want []string
	}{
		{a, lead, []string{"fence"}}, // not its own broadcast
		{a, peer, []string{"to ", "to build", "fence"}},
		{b, wb, []string{"to ", "to build", "fence"}},
		{hc, xc, []string{"to ", "fence"}}, // not in the group
	} {
		if got := bodies(drainUntil(t, tc.h, tc.e.GID, "fence")); !slices.Equal(got, tc.want) {
			t.Errorf("%s got %q, want %q", tc.e.Addr(), got, tc.want)
		}
	}
}

// TestUnknownTargets: a name or host that is not present is an error that
// names it, never a silent queue.
func TestUnknownTargets(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	lead := a.Register(t, "lead", bridge.RolePrimary)
	b.Register(t, "worker", bridge.RoleWorker)
	c.Converge(t)
	_, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "wroker@b", Message: "hi"}, nil)
	wantUserError(t, "misspelt name on a known host", err, "wroker@b")
	_, err = a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "worker@nowhere", Message: "hi"}, nil)
	wantUserError(t, "unknown host", err, `no gateway of host "nowhere"`)
	_, err = a.Core.RemoteSpawn(ctx, lead.GID, "nowhere", bridge.SpawnBody{Profile: "any"}, "9b7e1f7c-4a4b-4d6e-8f00-1a2b3c4d5e6f", time.Second)
	wantUserError(t, "spawn on an unknown host", err, `"nowhere"`)
}

// sent is a send in flight.
type sent struct {
	done chan struct{}
	res  *bridge.Result
	err  error
}

func sendAsync(h *memnettest.Host, gid string, req bridge.SendRequest) *sent {
	s := &sent{done: make(chan struct{})}
	go func() { defer close(s.done); s.res, s.err = h.Core.Send(context.Background(), gid, req, nil) }()
	return s
}

func askAsync(h *memnettest.Host, gid string, req bridge.AskRequest) *sent {
	s := &sent{done: make(chan struct{})}
	go func() { defer close(s.done); s.res, s.err = h.Core.Ask(context.Background(), gid, req, nil) }()
	return s
}

func (s *sent) wait(t *testing.T) *bridge.Result {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(memnettest.Timeout):
		t.Fatal("call did not return")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.res
}
