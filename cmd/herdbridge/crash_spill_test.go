package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestCrashWhileSpillingLosesNothing: replies stream into a primary that
// does not drain, so the gateway is moving them from the inbox into its
// state file (write, then ack) when it is kill -9ed. After a restart every
// reply whose send was confirmed drains exactly once; a send cut by the
// kill arrives at most once.
func TestCrashWhileSpillingLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real gateway process")
	}
	const n = 3000
	bin, gp, p, w := crashPair(t)
	var confirmed sync.Map
	var sent atomic.Int64
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < n; i += 8 {
				body := fmt.Sprintf("reply-%04d", i)
				r, err := w.CallCtx(t.Context(), "bridge_send", map[string]any{"target": "lead", "message": body})
				if err != nil || r.IsError {
					return // the gateway is gone
				}
				if r.Status == "confirmed" {
					confirmed.Store(body, true)
					sent.Add(1)
				}
			}
		}()
	}
	gatewaytest.Eventually(t, 60*time.Second, "a third sent", func() bool { return sent.Load() >= n/3 })
	gp.kill() // mid-stream: some replies stored, some in the window, some being written
	wg.Wait()
	p.Client.Close()
	w.Client.Close()

	gp2 := startGatewayProc(t, bin, gp.dir)
	p2 := procConn(t, gp2, "lead", "primary")
	seen := map[string]int{}
	for {
		r := p2.Call("bridge_poll", map[string]any{"max": 500, "wait_s": 1})
		if r.IsError {
			t.Fatalf("poll: %s", r.Text)
		}
		for _, m := range r.Messages {
			seen[m.Body]++
		}
		if len(r.Messages) == 0 {
			break
		}
	}
	lost, dups, ok := 0, 0, 0
	confirmed.Range(func(k, _ any) bool {
		if seen[k.(string)] == 0 {
			lost++
		} else {
			ok++
		}
		return true
	})
	for _, c := range seen {
		if c > 1 {
			dups++
		}
	}
	t.Logf("kill -9 while spilling: %d confirmed, %d of them drained after the restart, %d lost; %d drained in all, %d duplicated", sent.Load(), ok, lost, len(seen), dups)
	if lost != 0 || dups != 0 {
		t.Fatalf("%d confirmed replies lost, %d duplicated", lost, dups)
	}
}
