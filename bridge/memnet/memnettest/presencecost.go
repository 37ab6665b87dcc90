package memnettest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
)

// PresenceCost is one measurement of presence at idle (MeasurePresence).
type PresenceCost struct {
	G, E      int
	PerEntity bool          // the gateways ran Config.PresencePerEntity (before issue 25)
	Every     time.Duration // the heartbeat period of the run
	// PerPeriod is the deliveries (copies enqueued on bridge.roster and
	// bridge.control, fabric-wide) per heartbeat period at idle; PerSecond5s
	// is that at the default 5 s period.
	PerPeriod   float64
	PerSecond5s float64
	// Converge is how long after the last registration returned every
	// gateway held every other host's entities.
	Converge time.Duration
}

func (p PresenceCost) String() string {
	mode := "by host"
	if p.PerEntity {
		mode = "per entity"
	}
	return fmt.Sprintf("%d gateways × %d entities, %s: %.0f deliveries per period, %.1f/s at a 5 s period, converged %v after the last registration",
		p.G, p.E, mode, p.PerPeriod, p.PerSecond5s, p.Converge.Round(time.Millisecond))
}

// MeasurePresence starts g gateways with e registered entities each on one
// network (heartbeat period every), waits until every gateway sees every
// entity, then counts the presence deliveries over periods idle periods.
// The cluster stops before it returns.
func MeasurePresence(t testing.TB, g, e int, perEntity bool, every time.Duration, periods int) PresenceCost {
	t.Helper()
	c := New(t)
	defer c.close()
	tune := func(cfg *bridge.Config) {
		cfg.PresencePerEntity = perEntity
		cfg.PresenceEvery, cfg.PresenceTTL, cfg.PresenceWait = every, 4*every, 4*every
	}
	ids := make([]string, g)
	for i := range g {
		ids[i] = fmt.Sprintf("h%04d", i)
	}
	hosts := c.StartAll(ids, tune)
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range e {
				if _, _, err := h.Core.Register(context.Background(), bridge.RegisterRequest{Name: fmt.Sprintf("w%03d", j), Role: bridge.RoleWorker}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	last := time.Now()
	close(errs)
	for err := range errs {
		t.Fatalf("register: %v", err)
	}
	deadline := last.Add(30*time.Second + time.Duration(g)*300*time.Millisecond)
	for !converged(hosts, g, e) {
		if time.Now().After(deadline) {
			t.Fatalf("%d×%d: not converged after %v: %s", g, e, time.Since(last), spread(hosts))
		}
		time.Sleep(2 * time.Millisecond)
	}
	conv := time.Since(last)
	time.Sleep(2 * every) // what the registrations set off settles
	if !converged(hosts, g, e) {
		t.Fatalf("%d×%d: converged, then lost entities", g, e)
	}
	before := c.Net.Routed(memnet.ExchangeRoster) + c.Net.Routed(memnet.ExchangeControl)
	start := time.Now()
	time.Sleep(time.Duration(periods) * every)
	n := c.Net.Routed(memnet.ExchangeRoster) + c.Net.Routed(memnet.ExchangeControl) - before
	elapsed := time.Since(start)
	if !converged(hosts, g, e) {
		t.Fatalf("%d×%d: entities expired at idle", g, e)
	}
	perPeriod := float64(n) / (float64(elapsed) / float64(every))
	return PresenceCost{G: g, E: e, PerEntity: perEntity, Every: every, PerPeriod: perPeriod, PerSecond5s: perPeriod / 5, Converge: conv}
}

// converged reports whether every gateway holds the g-1 other hosts and
// their entities.
func converged(hosts []*Host, g, e int) bool {
	for _, h := range hosts {
		if hs, es := h.Core.RemoteCounts(); hs != g-1 || es != (g-1)*e {
			return false
		}
	}
	return true
}

// spread is the least and most hosts and entities any gateway holds.
func spread(hosts []*Host) string {
	minH, maxH, minE, maxE := 1<<30, 0, 1<<30, 0
	for _, h := range hosts {
		hs, es := h.Core.RemoteCounts()
		minH, maxH, minE, maxE = min(minH, hs), max(maxH, hs), min(minE, es), max(maxE, es)
	}
	return fmt.Sprintf("other hosts held %d…%d, their entities %d…%d", minH, maxH, minE, maxE)
}
