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
	drainedOnce(t, h, p, map[string]int{}, n)
}
