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
	// CPUSeconds: user+system CPU time used since the process started (0
	// where getrusage is missing); the load tool diffs two readings.
	CPUSeconds float64 `json:"cpuSeconds"`
}

func readRuntimeStats() *RuntimeStats {
	return &RuntimeStats{Goroutines: runtime.NumGoroutine(), HeapBytes: heapBytes(),
		RSSBytes: procRSS(), OpenFiles: openFiles(), CPUSeconds: cpuSeconds()}
}

// procRSS is VmRSS from /proc/self/status, in bytes.
func procRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("VmRSS:")) {
			continue
		}
		fields := bytes.Fields(line[len("VmRSS:"):])
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
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
