package benchreport

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Machine is what the report says about where it ran.
type Machine struct {
	CPU          string
	Cores        int
	RAM          string
	Kernel       string
	Go           string
	FsyncMs      float64 // median write+fsync of 4 KiB in the run's directory; 0 if not measured
	LoadStart    string  // /proc/loadavg's three averages when the run began
	LoadEnd      string  // and when the report was written
	Commit       string
	Date         time.Time
	Remark       string // the operator's own words about the run
	BrokerURLSet bool
}

// Probe reads the machine from /proc (Linux; elsewhere the fields say
// "unknown") and measures fsync in dir, where the run kept its files.
func Probe(dir string) Machine {
	m := Machine{CPU: "unknown", RAM: "unknown", Kernel: "unknown", Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC()}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = procField(string(raw), "model name")
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := strconv.ParseFloat(strings.Fields(procField(string(raw), "MemTotal") + " 0")[0], 64); err == nil && kb > 0 {
			m.RAM = strconv.FormatFloat(kb/(1<<20), 'f', 1, 64) + " GiB"
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(raw))
	}
	m.LoadEnd = LoadAverage("/proc/loadavg")
	m.FsyncMs = fsyncCost(dir)
	return m
}

// procField is the value of the first "key : value" line of a /proc file.
func procField(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// LoadAverage is the 1, 5 and 15 minute load averages a /proc/loadavg
// file (or a copy the run saved when it began) holds; "" if unreadable.
func LoadAverage(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// fsyncCost is the median of 20 write+fsync of 4 KiB in dir, in ms: what
// the embedded transport's one fsync per round trip costs on this disk.
func fsyncCost(dir string) float64 {
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		return 0
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	page := make([]byte, 4096)
	var ds []float64
	for range 20 {
		t0 := time.Now()
		if _, err := f.WriteAt(page, 0); err != nil {
			return 0
		}
		if err := f.Sync(); err != nil {
			return 0
		}
		ds = append(ds, float64(time.Since(t0))/float64(time.Millisecond))
	}
	sort.Float64s(ds)
	return ds[len(ds)/2]
}

// busy: a load average above half the cores before the run began means
// other work shared the machine with it (the average at the end includes
// the run's own work, so it cannot tell).
func (m Machine) busy() bool {
	f := strings.Fields(m.LoadStart)
	if len(f) == 0 {
		return false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return err == nil && v > float64(m.Cores)/2
}
