package memnettest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestPresenceCostLinearInHosts measures idle presence in one run, per
// entity (the gateways before issue 25) and by host: at 20 gateways × 20
// entities by host costs at most a tenth of per entity, and does not grow
// with the entities (20×5 and 20×20 within 1.5×).
func TestPresenceCostLinearInHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 60 gateways")
	}
	if raceEnabled {
		t.Skip("a cost measurement: make test runs it without the race detector (the detector's ~10× slower signature checks let per-entity presence outrun its TTL)")
	}
	every := time.Second
	old := MeasurePresence(t, 20, 20, true, every, 3)
	t.Log(old)
	big := MeasurePresence(t, 20, 20, false, every, 3)
	t.Log(big)
	small := MeasurePresence(t, 20, 5, false, every, 3)
	t.Log(small)
	t.Logf("by host / per entity at 20×20: %.3f", big.PerPeriod/old.PerPeriod)
	if big.PerPeriod > old.PerPeriod/10 {
		t.Errorf("by host %.0f deliveries per period, over a tenth of per entity's %.0f", big.PerPeriod, old.PerPeriod)
	}
	if r := big.PerPeriod / small.PerPeriod; r > 1.5 || r < 1/1.5 {
		t.Errorf("by host: 20×20 costs %.2f× 20×5 (%.0f vs %.0f): it depends on the entities", r, big.PerPeriod, small.PerPeriod)
	}
	t.Logf("20×20 by host converged %v after the last registration (issue 25's target: ≤ 2 s at G = 20; reported, not held: a time is a benchmark's)", big.Converge)
}

// TestPresenceCostAtScale runs HB_PRESENCE_G gateways × HB_PRESENCE_E
// (default 20) entities by host (HB_PRESENCE_PER_ENTITY=1: per entity)
// and reports the fabric-wide deliveries: not in CI, e.g.
//
//	HB_PRESENCE_G=100 go test ./bridge/memnet/memnettest -run PresenceCostAtScale -v -timeout 30m
func TestPresenceCostAtScale(t *testing.T) {
	g, _ := strconv.Atoi(os.Getenv("HB_PRESENCE_G"))
	if g < 2 {
		t.Skip("set HB_PRESENCE_G to the number of gateways")
	}
	e := 20
	if v, err := strconv.Atoi(os.Getenv("HB_PRESENCE_E")); err == nil && v > 0 {
		e = v
	}
	every := 5 * time.Second
	if v, err := time.ParseDuration(os.Getenv("HB_PRESENCE_EVERY")); err == nil && v > 0 {
		every = v
	}
	r := MeasurePresence(t, g, e, os.Getenv("HB_PRESENCE_PER_ENTITY") == "1", every, 3)
	t.Log(r)
	if !r.PerEntity && g == 100 && e == 20 && r.PerSecond5s > 5000 {
		t.Errorf("100×20 by host: %.0f deliveries/s, over 5,000", r.PerSecond5s)
	}
}
