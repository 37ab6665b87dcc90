//go:build !unix

package gateway

// cpuSeconds is unknown where getrusage is missing.
func cpuSeconds() float64 { return 0 }
