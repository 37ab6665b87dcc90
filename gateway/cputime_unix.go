//go:build unix

package gateway

import "syscall"

// cpuSeconds is the user+system CPU time this process has used since it
// started (getrusage), so a caller that reads it before and after a run
// (the load tool) sees what the run cost the gateway.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
