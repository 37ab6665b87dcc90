package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Restarts while replies stream in and are being spilled: every message
// confirmed must drain exactly once.
func TestRestartWhileSpilling(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 8 })
	p, w := pair(h)
	const n = 400
	var cur atomic.Pointer[bridge.Core]
	cur.Store(h.c)
	var mu sync.RWMutex // held for writing across a restart
	var sw sync.WaitGroup
	for k := range 4 {
		sw.Add(1)
		go func() {
			defer sw.Done()
			for i := k; i < n; i += 4 {
				for {
					mu.RLock()
					_, err := cur.Load().Send(context.Background(), w.GID, bridge.SendRequest{Target: "p", Message: fmt.Sprintf("m%04d", i)}, nil)
					mu.RUnlock()
					if err == nil {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	for range 4 {
		time.Sleep(60 * time.Millisecond)
		mu.Lock()
		h.restart()
		cur.Store(h.c)
		mu.Unlock()
	}
	sw.Wait()
	got := map[string]int{}
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
