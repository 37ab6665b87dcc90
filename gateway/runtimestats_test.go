package gateway_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestStatsRuntime: `stats` carries the process's goroutines, heap, RSS,
// open files and CPU time (the soak samples them from a separate gateway process),
// and the figures move with what the process holds.
func TestStatsRuntime(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	ask := func() gateway.RuntimeStats {
		t.Helper()
		r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "stats"})
		if err != nil || r.Stats == nil || r.Stats.Runtime == nil {
			t.Fatalf("stats: %+v %v", r, err)
		}
		return *r.Stats.Runtime
	}
	before := ask()
	if before.Goroutines <= 0 || before.HeapBytes == 0 {
		t.Fatalf("runtime stats: %+v", before)
	}
	if runtime.GOOS == "linux" && (before.RSSBytes == 0 || before.OpenFiles <= 0) {
		t.Fatalf("runtime stats on linux: %+v", before)
	}
	cpuMoves(t, ask, before)
	if runtime.GOOS != "linux" {
		return
	}
	// the split adds up (the kernel also counts shared memory, RssShmem,
	// which a gateway has none of)
	if before.RSSAnonBytes == 0 || before.RSSFileBytes == 0 || before.RSSAnonBytes+before.RSSFileBytes > before.RSSBytes {
		t.Fatalf("RSS split: anon %d + file %d, RSS %d", before.RSSAnonBytes, before.RSSFileBytes, before.RSSBytes)
	}
	const n = 40
	for i := 0; i < n; i++ {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	// other goroutines of this process may close a few files meanwhile,
	// never 40 of the gateway's own
	if after := ask(); after.OpenFiles < before.OpenFiles+n/2 {
		t.Fatalf("open files %d after opening %d more than %d", after.OpenFiles, n, before.OpenFiles)
	}
}

// cpuMoves: the CPU time `stats` reports grows while this process (the
// gateway's) works; the load tool diffs two readings.
func cpuMoves(t *testing.T, ask func() gateway.RuntimeStats, before gateway.RuntimeStats) {
	t.Helper()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return // no getrusage: 0
	}
	if before.CPUSeconds <= 0 {
		t.Fatalf("cpuSeconds %v: a process that started a gateway has used some CPU", before.CPUSeconds)
	}
	deadline := time.Now().Add(time.Minute)
	for sink := 0; ask().CPUSeconds <= before.CPUSeconds; {
		if time.Now().After(deadline) {
			t.Fatalf("cpuSeconds stayed at %v while the process worked", before.CPUSeconds)
		}
		for i := range 10_000_000 {
			sink ^= i * i
		}
		_ = sink
	}
}
