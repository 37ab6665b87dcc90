package gateway

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
)

// RuntimeStats is what a gateway process costs right now, for `herdbridge
// stats` and for the soak, which samples a separate gateway process over
// time to see that it does not grow. Cheap to read: no stop-the-world
// (runtime.ReadMemStats would stop the world; the heap figure comes from
// runtime/metrics instead) and two small /proc reads on Linux.
type RuntimeStats struct {
	Goroutines int    `json:"goroutines"`
	HeapBytes  uint64 `json:"heapBytes"` // the live heap the last GC marked
	RSSBytes   uint64 `json:"rssBytes"`  // resident set (0 where /proc is missing)
	OpenFiles  int    `json:"openFiles"` // open file descriptors (-1 where /proc is missing)
	// The resident set split: anonymous memory (the Go heap, stacks) and
	// file-backed pages (the binary, the stores' memory maps). A growing
	// RSS is a leak only if one of these grows with it, so the soak
	// samples both.
	RSSAnonBytes uint64 `json:"rssAnonBytes"`
	RSSFileBytes uint64 `json:"rssFileBytes"`
	// HeapFreeBytes is heap memory the runtime holds free but has not yet
	// returned to the system: RSS without being a leak.
	HeapFreeBytes uint64 `json:"heapFreeBytes"`
	// CPUSeconds: user+system CPU time used since the process started (0
	// where getrusage is missing); the load tool diffs two readings.
	CPUSeconds float64 `json:"cpuSeconds"`
}

func readRuntimeStats() *RuntimeStats {
	st := procStatus("VmRSS:", "RssAnon:", "RssFile:")
	return &RuntimeStats{Goroutines: runtime.NumGoroutine(), HeapBytes: heapBytes(),
		RSSBytes: st[0], RSSAnonBytes: st[1], RSSFileBytes: st[2],
		HeapFreeBytes: heapFreeBytes(), OpenFiles: openFiles(), CPUSeconds: cpuSeconds()}
}

// procStatus reads the named kB fields of /proc/self/status, in bytes, in
// the order asked (0 for a field that is missing, as off Linux).
func procStatus(keys ...string) []uint64 {
	out := make([]uint64, len(keys))
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		for i, k := range keys {
			if bytes.HasPrefix(line, []byte(k)) {
				out[i] = statusKB(line[len(k):])
			}
		}
	}
	return out
}

// statusKB parses "   1234 kB" into bytes.
func statusKB(rest []byte) uint64 {
	fields := bytes.Fields(rest)
	if len(fields) == 0 {
		return 0
	}
	kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// openFiles counts /proc/self/fd (the directory's own descriptor, open
// while it is read, is not counted).
func openFiles() int {
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names) - 1
}

// heapFreeBytes is free heap memory still mapped (free and unused spans,
// not yet scavenged back to the system).
func heapFreeBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}

// heapBytes is the live heap as the last GC marked it (garbage left out,
// so a leak shows as a rising line, not a saw), read without stopping the
// world.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
