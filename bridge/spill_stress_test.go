package bridge_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Stress: senders stream replies into p while pollers drain with handovers
// that are randomly delivered or not (unclaim), peeks read, and the
// spiller runs. Every message must be handed over exactly once, across a
// restart at the end.
func TestSpillDrainUnclaimStress(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 16; c.InboxMaxLength = 40 })
	p, w := pair(h)
	const n = 600
	var mu sync.Mutex
	got := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(k)))
			for ctx.Err() == nil {
				ho := &bridge.Handover{}
				res, err := h.c.Poll(bridge.WithHandover(ctx, ho), p.GID, bridge.PollRequest{Wait: time.Duration(r.Intn(30)) * time.Millisecond, Max: 1 + r.Intn(20), Peek: r.Intn(5) == 0}, nil)
				if err != nil || res == nil {
					continue
				}
				ok := r.Intn(3) != 0
				settle := func() {
					if ok && res.Status != bridge.StatusPeeked {
						mu.Lock()
						for _, m := range res.Messages {
							got[m.Body]++
						}
						mu.Unlock()
					}
					ho.Settle(ok)
				}
				if r.Intn(2) == 0 {
					settle()
				} else {
					d := time.Duration(r.Intn(5)) * time.Millisecond
					wg.Add(1)
					go func() { defer wg.Done(); time.Sleep(d); settle() }()
				}
			}
		}()
	}
	var sw sync.WaitGroup
	for k := range 4 {
		sw.Add(1)
		go func() {
			defer sw.Done()
			for i := k; i < n; i += 4 {
				for {
					_, err := h.c.Send(context.Background(), w.GID, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("m%04d", i)}, nil)
					if err == nil {
						break
					}
					time.Sleep(5 * time.Millisecond) // inbox full: retry
				}
			}
		}()
	}
	sw.Wait()
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()
	h.restart()
	time.Sleep(300 * time.Millisecond)
	drainedOnce(t, h, p, got, n)
}

// drainedOnce drains p (adding to got, body -> times drained) and fails
// unless each of "m0000".."m<n-1>" was drained exactly once and nothing
// is left in the store.
func drainedOnce(t *testing.T, h *harness, p bridge.Entity, got map[string]int, n int) {
	t.Helper()
	for {
		res := h.poll(p, bridge.PollRequest{Max: 500, Wait: 500 * time.Millisecond})
		for _, m := range res.Messages {
			got[m.Body]++
		}
		if len(res.Messages) == 0 {
			break
		}
	}
	lost, dup := 0, 0
	for i := range n {
		switch got[fmt.Sprintf("m%04d", i)] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	if lost != 0 || dup != 0 || storedHeld(h) != 0 {
		t.Fatalf("%d lost, %d duplicated, %d records left", lost, dup, storedHeld(h))
	}
}
