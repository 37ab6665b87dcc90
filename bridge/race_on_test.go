//go:build race

package bridge_test

// raceEnabled: the race detector slows CPU-bound tests ~10x; the few that
// move a lot of bytes scale their work down under it.
const raceEnabled = true
