package loadtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
)

// Sampler reads every gateway's runtime figures (`herdbridge stats` over
// its admin socket) at a fixed interval, and keeps the run's events.
type Sampler struct {
	targets []Target
	start   time.Time
	every   time.Duration

	mu      sync.Mutex
	samples []Sample
	events  []Event
}

// NewSampler samples targets every interval, counting time from now.
func NewSampler(targets []Target, every time.Duration) *Sampler {
	return &Sampler{targets: targets, start: time.Now(), every: every}
}

// Since is the time since the sampler started.
func (s *Sampler) Since() time.Duration { return time.Since(s.start) }

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	for {
		s.sampleAll()
		if sleep(ctx, s.every) != nil {
			return
		}
	}
}

func (s *Sampler) sampleAll() {
	for _, t := range s.targets {
		smp := Sample{AtS: s.Since().Seconds(), Host: t.Host}
		if r, err := gateway.Ask(t.StateDir, gateway.Request{Op: "stats"}); err == nil && r.Stats != nil && r.Stats.Runtime != nil {
			rt := r.Stats.Runtime
			smp.Up, smp.Goroutines, smp.OpenFiles = true, rt.Goroutines, rt.OpenFiles
			smp.HeapMiB, smp.RSSMiB = mib(rt.HeapBytes), mib(rt.RSSBytes)
			smp.AnonMiB, smp.FileMiB, smp.HeapFreeMiB = mib(rt.RSSAnonBytes), mib(rt.RSSFileBytes), mib(rt.HeapFreeBytes)
		}
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
	}
}

// Event records what the driver did, at the time since the start.
func (s *Sampler) Event(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, Event{AtS: s.Since().Seconds(), What: fmt.Sprintf(format, args...)})
}

// Report accounts for the engine's ledger and the samples of a run whose
// traffic lasted run and whose drain took drain.
func (s *Sampler) Report(e *Engine, run, drain time.Duration, machine string) *Report {
	s.mu.Lock()
	samples := append([]Sample(nil), s.samples...)
	events := append([]Event(nil), s.events...)
	s.mu.Unlock()
	r := &Report{Started: s.start, Duration: run.String(), DrainS: drain.Seconds(), Machine: machine,
		Entities: e.Entities(), Events: events, Samples: samples}
	for _, t := range s.targets {
		r.Gateways = append(r.Gateways, t.Host)
	}
	sum := e.Ledger.Summarize()
	r.Kinds, r.Total, r.LostDetail, r.DupDetail, r.ErrorDetail = sum.Kinds, sum.Total, sum.Lost, sum.Dups, sum.Errors
	r.Untagged, r.ReceiveFailed = sum.Untagged, sum.ReceiveFailed
	r.Flat = flatness(samples, r.Gateways, run)
	r.judge()
	return r
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
