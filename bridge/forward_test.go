package bridge_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// fakeInjector records what the forward path asks of it.
type fakeInjector struct {
	mu      sync.Mutex
	got     []string
	depth   []int // inbox depth seen at inject time: 0 proves ack-before-inject
	tr      *embedded.Transport
	receipt bridge.InjectReceipt
}

func (f *fakeInjector) Inject(ctx context.Context, b bridge.Brief) bridge.InjectReceipt {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, string(b.Env.Body))
	f.depth = append(f.depth, f.tr.Depth(b.To.GID))
	return f.receipt
}

func (f *fakeInjector) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}

// forwardCore is a core whose workers in panes take briefs through inj;
// with typed false nothing is typed (every entity pulls) and inj only
// lends its transport to the test.
func forwardCore(t *testing.T, inj *fakeInjector, typed bool) *bridge.Core {
	t.Helper()
	return startCore(t, func(cfg *bridge.Config, tr *embedded.Transport) {
		inj.tr = tr
		cfg.MaxWait, cfg.InjectWait = 3*time.Second, 2*time.Second
		if typed {
			cfg.Injector = inj
		}
	})
}

func TestForwardPathReceipts(t *testing.T) {
	for _, tc := range []struct {
		receipt bridge.InjectReceipt
		want    string
	}{
		{bridge.InjectReceipt{Status: bridge.StatusSubmitted}, bridge.StatusSubmitted},
		{bridge.InjectReceipt{Status: bridge.StatusInjected}, bridge.StatusInjected},
		{bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "turn start not observed"}, bridge.StatusUncertain},
		{bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "agent blocked on a dialog"}, bridge.StatusFailed},
	} {
		t.Run(tc.want, func(t *testing.T) {
			inj := &fakeInjector{receipt: tc.receipt}
			c := forwardCore(t, inj, true)
			ctx := context.Background()
			p, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
			if err != nil {
				t.Fatal(err)
			}
			w, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Fatalf("status %s (%s), want %s", res.Status, res.Reason, tc.want)
			}
			if tc.want == bridge.StatusUncertain && res.Reason != tc.receipt.Reason {
				t.Fatalf("reason %q", res.Reason)
			}
			inj.mu.Lock()
			defer inj.mu.Unlock()
			if len(inj.got) != 1 || inj.got[0] != "brief" || inj.depth[0] != 0 {
				t.Fatalf("injected %v with inbox depth %v (want acked before inject)", inj.got, inj.depth)
			}
			// nothing is held for pull: the pane got it
			if r, _ := c.Poll(ctx, w.GID, bridge.PollRequest{}, nil); r.Status != bridge.StatusEmpty {
				t.Fatalf("worker poll after inject: %+v", r)
			}
		})
	}
}

// TestForwardPathNoRungFails: an injector that reports no rung leaves the
// sender with a loud failed, never a silent confirmed.
func TestForwardPathNoRungFails(t *testing.T) {
	inj := &fakeInjector{receipt: bridge.InjectReceipt{}}
	c := forwardCore(t, inj, true)
	ctx := context.Background()
	p, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != bridge.StatusFailed {
		t.Fatalf("status %s, want failed", res.Status)
	}
}

// blockingInjector never finishes before its context ends: a worker gateway
// that dies mid-inject.
type blockingInjector struct{ started chan struct{} }

func (b *blockingInjector) Inject(ctx context.Context, _ bridge.Brief) bridge.InjectReceipt {
	close(b.started)
	<-ctx.Done()
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "cancelled"}
}

func (b *blockingInjector) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}

// TestForwardPathCrashReportsFailed: the gateway dies between the ack and
// the inject, so no receipt is ever sent; after a restart the brief awaiting
// its receipt is reported FAILED to the sender once its bound passes.
func TestForwardPathCrashReportsFailed(t *testing.T) {
	dir := t.TempDir()
	open := func(inj bridge.Injector) (*bridge.Core, func()) {
		tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(filepath.Join(dir, "s.db"), 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := bridge.New(bridge.Config{Host: "h1", Transport: tr, Store: st, Injector: inj, MaxWait: 3 * time.Second,
			InjectWait: 300 * time.Millisecond, ReceiptWait: 300 * time.Millisecond, SweepEvery: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return c, func() { c.Close(); st.Close(); tr.Close() }
	}
	ctx := context.Background()
	inj := &blockingInjector{started: make(chan struct{})}
	c1, close1 := open(inj)
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, _, _ := c1.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if _, _, err := c1.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"}); err != nil {
		t.Fatal(err)
	}
	sendCtx, cancelSend := context.WithCancel(ctx)
	go func() { _, _ = c1.Send(sendCtx, p.GID, bridge.SendRequest{Target: "w", Message: "brief"}, nil) }()
	<-inj.started // acked, being injected
	cancelSend()
	close1() // the crash: the FAILED the forward path would send has nowhere to go

	c2, close2 := open(&fakeInjector{})
	defer close2()
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c2.Poll(ctx, p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != bridge.StatusDrained || r.Messages[0].Kind != bridge.KindFailed {
		t.Fatalf("after the crash the sender got %+v", r)
	}
	if r2, _ := c2.Poll(ctx, p.GID, bridge.PollRequest{Wait: 500 * time.Millisecond}, nil); r2.Status != bridge.StatusEmpty {
		t.Fatalf("reported twice: %+v", r2)
	}
}
