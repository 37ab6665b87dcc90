package gateway_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// BenchmarkForwardPath is a brief's trip from the primary's bridge_send to
// a "submitted" receipt through a fake herdr with an idle agent: publish,
// ack, status gate, agent.prompt, herdr's own 300 ms submit delay, the turn
// seen starting, INJECTED back to the sender. herdrSubmitDelay-ms is the
// baseline in the same run; overhead-ms is what the bridge adds (target
// ≤ 50 ms). /20-workers briefs 20 workers at once.
func BenchmarkForwardPath(b *testing.B) {
	const submitDelay = 300 * time.Millisecond
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("%d-workers", n), func(b *testing.B) {
			// schema validation off: it is the fake's cost, not the bridge's
			fake := herdrtest.New(b, herdrtest.WithSubmitDelay(submitDelay), herdrtest.WithTurnDuration(10*time.Millisecond), herdrtest.WithoutValidation())
			g := startHerdrGateway(b, fake, func(c *gateway.Config) { c.Core.MaxWait = 45 * time.Second })
			p := gatewaytest.HTTPConn(b, g, "lead", "primary")
			panes := make([]string, n)
			for i := range panes {
				panes[i] = fake.AddAgent(herdrtest.PaneOptions{Agent: "claude", Seen: true})
				gatewaytest.PaneConn(b, g, fmt.Sprintf("w%d", i), "worker", panes[i])
			}
			settled := func() {
				for _, pn := range panes {
					for st := fake.Status(pn); st != "idle" && st != "done"; st = fake.Status(pn) {
						time.Sleep(2 * time.Millisecond)
					}
				}
			}
			var lat []time.Duration
			var wall time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				settled()
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for k := range panes {
					wg.Add(1)
					go func(k int) {
						defer wg.Done()
						t0 := time.Now()
						r := p.Call("bridge_send", map[string]any{"target": fmt.Sprintf("w%d", k), "message": fmt.Sprintf("brief %d.%d", i, k)})
						d := time.Since(t0)
						if r.Status != "submitted" {
							b.Errorf("receipt %q %q", r.Status, r.Reason)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}(k)
				}
				wg.Wait()
				wall += time.Since(start)
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(submitDelay), "herdrSubmitDelay-ms")
			b.ReportMetric(ms(lat[len(lat)/2]-submitDelay), "overhead-p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]-submitDelay), "overhead-p99-ms")
			b.ReportMetric(ms(wall/time.Duration(b.N)), "all-submitted-ms")
		})
	}
}
