package main

import (
	"fmt"
	"sync"
	"testing"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestGatewayCrashOnBroker: a real gateway process on the broker is kill
// -9ed with 1000 replies held for its primary; after a restart all 1000
// are drained, none lost, none surfaced twice.
func TestGatewayCrashOnBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real gateway process")
	}
	url := brokerURL(t)
	const n = 1000
	bin := buildBinary(t)
	dir := gatewaytest.TempDir(t)
	host := gatewaytest.UniqueHost("crash")
	gp := startGatewayProcArgs(t, bin, dir, host, "--broker", url)
	p := procConn(t, gp, "lead", "primary")
	w := procConn(t, gp, "w", "worker")
	var wg sync.WaitGroup
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for i := k; i < n; i += 8 {
				w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": fmt.Sprintf("held-%04d", i)}, "confirmed")
			}
		}(k)
	}
	wg.Wait()
	gp.kill()
	p.Client.Close()
	w.Client.Close()

	gp2 := startGatewayProcArgs(t, bin, dir, host, "--broker", url)
	p2 := procConn(t, gp2, "lead", "primary")
	seen := map[string]int{}
	for {
		r := p2.Call("bridge_poll", map[string]any{"max": 500, "wait_s": 2})
		if r.IsError {
			t.Fatal(r.Text)
		}
		for _, m := range r.Messages {
			seen[m.Body]++
		}
		if len(r.Messages) == 0 {
			break
		}
	}
	dups := 0
	for _, c := range seen {
		if c > 1 {
			dups++
		}
	}
	t.Logf("gateway kill -9 on the broker with %d replies held: %d drained after restart, %d duplicates", n, len(seen), dups)
	if len(seen) != n || dups != 0 {
		t.Fatalf("%d of %d drained, %d duplicated", len(seen), n, dups)
	}
}
