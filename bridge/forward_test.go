package bridge_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
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

func forwardCore(t *testing.T, inj *fakeInjector) *bridge.Core {
	t.Helper()
	dir := t.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := bridge.OpenStore(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	inj.tr = tr
	c, err := bridge.New(bridge.Config{Host: "h1", Transport: tr, Store: st, MaxWait: 3 * time.Second, InjectWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.SetInjector(inj)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); st.Close(); tr.Close() })
	return c
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
			c := forwardCore(t, inj)
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
	c := forwardCore(t, inj)
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
