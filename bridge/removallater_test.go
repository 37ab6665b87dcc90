package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// stuckTransport keeps the deliveries of one inbox from the core while
// stuck is set: handed to its consumer and never settled, as a consumer
// whose link went (or a broker cut the count waits out) leaves them.
type stuckTransport struct {
	*embedded.Transport
	mu      sync.Mutex
	stuck   string // the inbox whose deliveries are kept
	swallow int    // deliveries kept so far
}

func (s *stuckTransport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	return s.Transport.Consume(ctx, gid, prefetch, func(d bridge.Delivery) {
		s.mu.Lock()
		keep := gid == s.stuck
		if keep {
			s.swallow++
		}
		s.mu.Unlock()
		if !keep {
			h(d)
		}
	})
}

func (s *stuckTransport) set(gid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck = gid
}

func (s *stuckTransport) kept() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.swallow
}

// TestRemovalPastItsDrainBoundReportsWhatWasLeft: a removal whose closed
// inbox is not emptied within its bound (its consumer took three messages
// and never settled them) answered its caller and then deleted the inbox,
// messages and all — three sends answered confirmed that no one ever
// heard of again. Now the drain goes on in the background: once the
// transport hands them over, each is reported FAILED to its sender once,
// and only then is the inbox deleted.
func TestRemovalPastItsDrainBoundReportsWhatWasLeft(t *testing.T) {
	var tr *stuckTransport
	const bound = 300 * time.Millisecond
	h := newHarness(t, func(cfg *bridge.Config) {
		tr = &stuckTransport{Transport: cfg.Transport.(*embedded.Transport)}
		cfg.Transport, cfg.RemovalDrainBound = tr, bound
	})
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	tr.set(w.GID)
	f := newFates()
	for i := range 3 {
		f.accept(h.send(s, bridge.SendRequest{Target: "w", Message: fmt.Sprintf("m%d", i)}).MsgID, s.Name)
	}
	eventually(t, "the worker's consumer took all three", func() bool { return tr.kept() == 3 })

	start := time.Now()
	if err := h.c.Remove(context.Background(), w.GID); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if took := time.Since(start); took < bound {
		t.Fatalf("the removal returned after %v, before its %v bound, with three messages in the inbox", took, bound)
	}
	time.Sleep(2 * bound) // a bound or two of the background drain, still stuck
	if !h.tr.HasInbox(w.GID) {
		t.Fatal("the inbox was deleted with three confirmed messages in it, none reported")
	}
	if r := h.poll(s, bridge.PollRequest{}); len(r.Messages) != 0 {
		t.Fatalf("reported while the transport still held the messages: %+v", r.Messages)
	}
	// a spawn retried with the removed worker's id would bind the draining
	// inbox again and take its messages as a new worker's
	if _, _, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: "w2", Role: bridge.RoleWorker, GID: w.GID}); err == nil {
		t.Fatal("a registration took the gid of an entity whose removal is still draining its inbox")
	}

	tr.set("") // the transport hands them over again
	eventually(t, "the removal finished: the inbox is gone", func() bool { return !h.tr.HasInbox(w.GID) })
	collectReports(t, h, s, f)
	f.check(t)
	if len(f.reported) != 3 {
		t.Fatalf("reported %d, want 3", len(f.reported))
	}
}
