//go:build race

package memnettest

// raceEnabled: the race detector slows each signature check ~10×, and
// per-entity presence at 20 gateways × 20 entities (8,400 signed
// heartbeats a period) then outruns its own TTL: the cost comparison runs
// without it, in make test's own line.
const raceEnabled = true
