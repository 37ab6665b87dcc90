package bridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// busyInjector reports its pane not ready until ready is set.
type busyInjector struct {
	ready atomic.Bool
	mu    sync.Mutex
	typed []string
}

func (b *busyInjector) Inject(_ context.Context, br bridge.Brief) bridge.InjectReceipt {
	if !b.ready.Load() {
		return bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: "working", Reason: br.To.Name + " is working"}
	}
	if err := br.Typing(); err != nil {
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: err.Error()}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.typed = append(b.typed, string(br.Env.Body))
	return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
}

func (b *busyInjector) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}

// TestQueuedBriefIsNotOverdue: a brief queued at a busy pane is not
// reported FAILED by the sender's overdue check once the inject bound and
// the receipt wait have passed (on the core's clock): its deadline is its
// expiresAt. When the pane is ready it is typed, and its receipt is held.
func TestQueuedBriefIsNotOverdue(t *testing.T) {
	var offset atomic.Int64 // the core's clock runs ahead by this much
	inj := &busyInjector{}
	c := queueCore(t, inj, func(cfg *bridge.Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
	if err != nil || res.Status != bridge.StatusQueued || !strings.Contains(res.Reason, "w is working") || !strings.Contains(res.Reason, "place 1") {
		t.Fatalf("send: %+v (%v)", res, err)
	}
	if q := rosterQueued(c, "w"); q != 1 {
		t.Fatalf("roster shows %d queued briefs for w, want 1", q)
	}
	offset.Store(int64(time.Hour)) // far past InjectWait + ReceiptWait, well before expiresAt (24h)
	if r, _ := c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 500 * time.Millisecond}, nil); r.Status != bridge.StatusEmpty {
		t.Fatalf("a queued brief was reported: %+v", r)
	}
	inj.ready.Store(true)
	c.PaneStatus("p1", "idle") // herdr's status event wakes the pane's runner (the re-check is an hour)
	r, err := c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	if err != nil || r.Status != bridge.StatusDrained || r.Messages[0].Kind != bridge.KindInjected || r.Messages[0].Corr != res.MsgID ||
		!strings.HasPrefix(r.Messages[0].Body, bridge.StatusSubmitted) {
		t.Fatalf("receipt after the pane was ready: %+v held %+v (%v)", r, r.Held, err)
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	if len(inj.typed) != 1 {
		t.Fatalf("typed %q", inj.typed)
	}
}

// queueCore is a core on the embedded transport whose pane workers take
// briefs through inj; the pane re-check is an hour, so only status events
// wake a pane's runner.
func queueCore(t *testing.T, inj bridge.Injector, mod ...func(*bridge.Config)) *bridge.Core {
	t.Helper()
	return startCore(t, func(cfg *bridge.Config, _ *embedded.Transport) {
		cfg.Injector, cfg.MaxWait = inj, 3*time.Second
		cfg.InjectWait, cfg.ReceiptWait, cfg.SweepEvery, cfg.PaneRecheck = time.Second, time.Second, 20*time.Millisecond, time.Hour
		for _, m := range mod {
			m(cfg)
		}
	})
}

// startCore starts a core of host h1 on an embedded transport and a store
// in a temp dir, configured by mod (which may also take the transport).
func startCore(t *testing.T, mod func(*bridge.Config, *embedded.Transport)) *bridge.Core {
	t.Helper()
	dir := t.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := bridge.Config{Host: "h1", Transport: tr, Store: st}
	mod(&cfg, tr)
	c, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); st.Close(); tr.Close() })
	return c
}

// TestQueuedBriefIsNotTheCurrentBrief: the brief a worker works on is the
// one typed into its pane, not one still waiting in the queue — so its
// bridge_ask with no target goes to whoever briefed it last by typing.
func TestQueuedBriefIsNotTheCurrentBrief(t *testing.T) {
	inj := &busyInjector{}
	inj.ready.Store(true)
	c := queueCore(t, inj)
	ctx := context.Background()
	a, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "a", Role: bridge.RolePrimary})
	b, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "b", Role: bridge.RolePrimary})
	w, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Send(ctx, a.GID, bridge.SendRequest{Target: "w", Message: "from a"}, nil); err != nil || r.Status != bridge.StatusSubmitted {
		t.Fatalf("a's brief: %+v %v", r, err)
	}
	inj.ready.Store(false)
	if r, err := c.Send(ctx, b.GID, bridge.SendRequest{Target: "w", Message: "from b"}, nil); err != nil || r.Status != bridge.StatusQueued {
		t.Fatalf("b's brief: %+v %v", r, err)
	}
	r, err := c.Ask(ctx, w.GID, bridge.AskRequest{Question: "which one?", Wait: 50 * time.Millisecond}, nil)
	if err != nil || r.Target != "a@h1" {
		t.Fatalf("the worker's ask went to %q (%+v, %v), want a@h1: b's brief is only queued", r.Target, r, err)
	}
}

// TestQueuedRequestStatusMoves: a request_id repeat of a brief that was
// queued reports its status as it is now — submitted once it was typed —
// not the queued it had when the first call returned.
func TestQueuedRequestStatusMoves(t *testing.T) {
	inj := &busyInjector{}
	c := queueCore(t, inj)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "q-1"}
	first, err := c.Send(ctx, p.GID, req, nil)
	if err != nil || first.Status != bridge.StatusQueued {
		t.Fatalf("first: %+v %v", first, err)
	}
	inj.ready.Store(true)
	c.PaneStatus("p1", "idle")
	if r, err := c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil); err != nil || len(r.Messages) != 1 || r.Messages[0].Kind != bridge.KindInjected {
		t.Fatalf("receipt: %+v %v", r, err)
	}
	again, err := c.Send(ctx, p.GID, req, nil)
	if err != nil || !again.Deduped || again.MsgID != first.MsgID || again.Status != bridge.StatusSubmitted {
		t.Fatalf("repeat after the brief was typed: %+v %v, want submitted", again, err)
	}
	inj.mu.Lock()
	defer inj.mu.Unlock()
	if len(inj.typed) != 1 {
		t.Fatalf("typed %q", inj.typed)
	}
}

// TestPaneQueueBounded: a pane's queue holds at most InboxMaxLength briefs,
// like the inbox it drains; one more is FAILED to its sender at once, saying
// why, and the ones queued are still typed once the pane is ready.
func TestPaneQueueBounded(t *testing.T) {
	inj := &busyInjector{}
	c := queueCore(t, inj, func(cfg *bridge.Config) { cfg.InboxMaxLength = 2 })
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two"} {
		if r, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: m}, nil); err != nil || r.Status != bridge.StatusQueued {
			t.Fatalf("%s: %+v %v", m, r, err)
		}
	}
	r, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "three"}, nil)
	if err != nil || r.Status != bridge.StatusFailed || len(r.Messages) != 1 || !strings.Contains(r.Messages[0].Body, "2 briefs already wait") {
		t.Fatalf("a third brief for a queue bounded at 2: %+v %v", r, err)
	}
	inj.ready.Store(true)
	c.PaneStatus("p1", "idle")
	deadline := time.Now().Add(5 * time.Second)
	for {
		inj.mu.Lock()
		typed := append([]string(nil), inj.typed...)
		inj.mu.Unlock()
		if len(typed) == 2 {
			if typed[0] != "one" || typed[1] != "two" {
				t.Fatalf("typed %q", typed)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("typed %q after the pane was ready, want one and two", typed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rosterQueued is the roster's count of briefs queued for name's pane.
func rosterQueued(c *bridge.Core, name string) int {
	for _, e := range c.Roster().Entities {
		if e.Name == name {
			return e.Queued
		}
	}
	return -1
}
