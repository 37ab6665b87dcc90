package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func storedFor(h *harness, gid string) int {
	n := 0
	_ = h.st.EachHeld(func(g string, _ uint64, _ []byte) error {
		if g == gid {
			n++
		}
		return nil
	})
	return n
}

// Removing an entity while its messages are being written leaves no
// record behind: one registered again under the same gid (a spawned
// worker's) must not get the removed one's messages.
func TestRemoveWhileSpillingLeavesNoRecords(t *testing.T) {
	for iter := range 15 {
		h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 64 })
		p, w := pair(h)
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					_, _ = h.c.Send(context.Background(), w.GID, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("old %d.%d", k, i)}, nil)
				}
			}()
		}
		eventually(t, "some held", func() bool { v, _ := h.view("p"); return v.Held > 10+iter })
		if err := h.c.Remove(context.Background(), p.GID); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		wg.Wait()
		// a batch being written when the entity went is deleted once the
		// write returns (spillBatch's orphans): wait for that, bounded
		deadline := time.Now().Add(5 * time.Second)
		for storedFor(h, p.GID) != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := storedFor(h, p.GID); n != 0 {
			t.Logf("iteration %d: %d records left in the store for the removed entity", iter, n)
			if _, _, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: "p", Role: bridge.RolePrimary, GID: p.GID}); err != nil {
				t.Fatalf("Register again: %v", err)
			}
			h.restart()
			got := h.poll(p, bridge.PollRequest{Max: 500})
			t.Fatalf("the new p (same gid) drains %d of the removed p's messages, e.g. %v", len(got.Messages), bodiesOf(got.Messages[:min(3, len(got.Messages))]))
		}
		_ = h.c.Close()
	}
}
