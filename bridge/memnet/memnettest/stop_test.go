package memnettest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// closer is a pane starter that records ClosePane and can be made to fail
// it (herdr down) or to find the pane gone.
type closer struct {
	mu     sync.Mutex
	closed []string
	err    error
}

func (c *closer) ProfileNames() []string { return nil }
func (c *closer) StartPane(context.Context, bridge.PaneWorker) (bridge.PaneStarted, error) {
	return bridge.PaneStarted{}, errors.New("not used")
}

func (c *closer) ClosePane(_ context.Context, pane string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.closed = append(c.closed, pane)
	return nil
}

func (c *closer) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.closed...)
}

func (c *closer) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// TestStopAcrossHosts: a primary on A stops a worker on B over B's
// control queue. While A's broker link is down the stop fails within its
// bound and says so (it is never spooled); while B cannot
// close the pane the stop fails and nothing is removed (no half-stopped
// worker); then the same stop_id goes through once: the pane is closed,
// the worker is gone on B and from A's roster, and a retry closes nothing
// again. A worker on A is refused.
func TestStopAcrossHosts(t *testing.T) {
	cl := &closer{}
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Panes = cl })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	wa := a.Register(t, "wa", bridge.RoleWorker)
	if _, _, err := b.Core.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "w1:p7"}); err != nil {
		t.Fatal(err)
	}
	c.Converge(t)

	_, err := a.Core.Stop(ctx, wa.GID, bridge.StopRequest{Target: "w@b"})
	wantUserError(t, "a worker stopping another", err, "refused", "only itself")

	id := uuid.NewString()
	closePane := true
	req := bridge.StopRequest{Target: "w@b", Reason: "done with it", ClosePane: &closePane, StopID: id}
	a.Transport.LinkDown() // memnet holds a publish until the link is back; the broker gives up after its DownWait
	down, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.Core.Stop(down, lead.GID, req)
	cancel()
	wantUserError(t, "stop with the link down", err, "link down")
	a.Transport.LinkUp()

	cl.fail(errors.New("herdr: connection refused"))
	_, err = a.Core.Stop(ctx, lead.GID, req)
	wantUserError(t, "stop while the pane cannot close", err, "nothing was removed", id)
	if _, ok := b.Core.Entity(mustResolve(t, b, "w").GID); !ok {
		t.Fatal("a failed stop removed the worker")
	}
	cl.fail(nil)

	r, err := a.Core.Stop(ctx, lead.GID, req)
	if err != nil || r.Status != bridge.StatusStopped || r.Target != "w@b" {
		t.Fatalf("stop: %+v %v", r, err)
	}
	if got := cl.calls(); len(got) != 1 || got[0] != "w1:p7" {
		t.Fatalf("panes closed: %q", got)
	}
	if _, err := b.Core.Resolve("w"); err == nil {
		t.Fatal("w still on b")
	}
	memnettest.Eventually(t, "a's roster without w", func() bool { return !a.Sees("w@b") })
	again, err := a.Core.Stop(ctx, lead.GID, req)
	if err != nil || !again.Deduped || len(cl.calls()) != 1 {
		t.Fatalf("retry: %+v %v, closes %q", again, err, cl.calls())
	}
}

func mustResolve(t *testing.T, h *memnettest.Host, name string) bridge.Entity {
	t.Helper()
	e, err := h.Core.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
