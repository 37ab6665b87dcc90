package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
)

// ToolOptions is one run of the load tool (`herdbridge loadtest`).
type ToolOptions struct {
	Bin string // herdbridge, for the stdio relay
	// StateDir is the running gateway's (its admin socket); ignored with
	// InProcess, which starts a throwaway embedded gateway in a temp dir.
	StateDir  string
	InProcess bool
	// Primaries and Workers (pull workers, split over HTTP and the stdio
	// relay by Transport).
	Primaries, Workers int
	Transport          Transport // Mixed, HTTP or Stdio
	Duration           time.Duration
	// Rate is each primary's actions (brief, broadcast, filtered poll) a
	// second; a worker asks a primary every 8 actions' time.
	Rate float64
	// Register pre-registers this many idle entities, then RosterCalls
	// bridge_roster calls are timed before the traffic starts.
	Register, RosterCalls int
	// DrainWithin bounds the wait for outstanding deliveries once the
	// traffic stops.
	DrainWithin time.Duration
	// Progress gets a line every ProgressEvery (nil: none).
	Progress      io.Writer
	ProgressEvery time.Duration
	Logger        *slog.Logger
}

// sendRetry bounds a send's retries while the gateway does not answer:
// the load tool restarts nothing, so a gateway away this long is an
// error, not a restart to ride out.
const sendRetry = 30 * time.Second

// teamSize is how many workers a broadcast reaches at most: a team, as
// an operator groups workers, not every worker of the run.
const teamSize = 10

// sampleEvery is the sampling of the gateway's runtime figures.
const sampleEvery = time.Second

// RunTool runs the load: it finds (or starts) the gateway, registers the
// idle entities, connects the agents, times the roster, sends traffic for
// Duration, awaits the outstanding deliveries, and reports. Whatever it
// registered is removed before it returns, also when ctx ends early (then
// the report covers what ran and the error says it was interrupted).
func RunTool(ctx context.Context, o ToolOptions) (rep *ToolReport, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tg, label, closeTarget, err := openTarget(ctx, o)
	if err != nil {
		return nil, err
	}
	defer closeTarget()
	prefix, err := runPrefix()
	if err != nil {
		return nil, err
	}
	eng := New(Config{Bin: o.Bin, Targets: []Target{tg}, Primaries: o.Primaries, PullWorkers: o.Workers,
		ActEvery: time.Duration(float64(time.Second) / o.Rate), AskEvery: time.Duration(8 * float64(time.Second) / o.Rate),
		Prefix: prefix, Transport: o.Transport, RetryFor: sendRetry, NoWaits: true,
		TeamSize: teamSize, Logger: o.Logger})
	var idle []string
	defer func() {
		eng.Close()
		if !o.InProcess { // a throwaway gateway goes with its dir
			err = errors.Join(err, removeEntities(tg.StateDir, append(eng.Named(tg.StateDir), idle...)))
		}
	}()
	o.progress("loadtest: run %s against %s", prefix, label)
	if idle, err = registerIdle(ctx, tg.StateDir, prefix, o.Register); err != nil {
		return nil, err
	}
	if err := eng.Connect(ctx); err != nil {
		return nil, fmt.Errorf("loadtest: connecting the agents: %w", err)
	}
	facts := runFacts{label: label, registered: len(idle), primaries: o.Primaries, worker: o.Workers}
	if o.Register > 0 {
		start := time.Now()
		eng.MeasureRoster(ctx, o.RosterCalls)
		facts.rosterTook = time.Since(start)
	}
	o.progress("loadtest: %d agents connected; traffic for %s", len(eng.all()), o.Duration)
	return runTraffic(ctx, o, eng, tg, facts)
}

// runTraffic runs and drains the traffic, sampling the gateway, and
// builds the report.
func runTraffic(ctx context.Context, o ToolOptions, eng *Engine, tg Target, facts runFacts) (*ToolReport, error) {
	before, err := gatewayRuntime(tg.StateDir)
	if err != nil {
		return nil, err
	}
	smp := NewSampler([]Target{tg}, sampleEvery)
	sctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); smp.Run(sctx) }()
	go func() { defer bg.Done(); o.reportProgress(sctx, eng) }()
	start := time.Now()
	eng.Run(ctx, o.Duration)
	facts.ran = time.Since(start)
	if ctx.Err() == nil {
		o.progress("loadtest: traffic stopped after %.1f s; awaiting outstanding deliveries (up to %s)", facts.ran.Seconds(), o.DrainWithin)
		eng.Drain(ctx, o.DrainWithin)
	}
	after, err := gatewayRuntime(tg.StateDir)
	stop()
	bg.Wait()
	if err != nil {
		return nil, err
	}
	facts.before, facts.after = before, after
	rep := buildToolReport(eng, smp, facts)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("loadtest: interrupted after %.1f s of traffic", facts.ran.Seconds())
	}
	return rep, nil
}

// openTarget is the gateway to load: the one running on StateDir, or a
// throwaway embedded one (closeTarget stops it and removes its dir).
func openTarget(ctx context.Context, o ToolOptions) (tg Target, label string, closeTarget func(), err error) {
	if !o.InProcess {
		r, err := gateway.Ask(o.StateDir, gateway.Request{Op: "stats"})
		if err != nil {
			return Target{}, "", nil, err
		}
		if r.Stats == nil || r.Stats.Runtime == nil {
			return Target{}, "", nil, errors.New("loadtest: the gateway reports no runtime figures (an older gateway? restart it)")
		}
		return Target{Host: r.Stats.Host, StateDir: o.StateDir}, r.Stats.Host + "@" + o.StateDir, func() {}, nil
	}
	g, dir, err := startInProcess(ctx, o.Logger)
	if err != nil {
		return Target{}, "", nil, err
	}
	return Target{Host: g.Host(), StateDir: dir}, "in-process", func() { _ = g.Close(); _ = os.RemoveAll(dir) }, nil
}

// inProcessHost is the throwaway gateway's host id.
const inProcessHost = "loadtest"

// startInProcess opens and runs an embedded gateway (no broker, no herdr,
// fsync on as by default) in a new temp dir.
func startInProcess(ctx context.Context, log *slog.Logger) (*gateway.Gateway, string, error) {
	dir, err := os.MkdirTemp("", "hb-loadtest-") // short: the admin socket's path is bounded
	if err != nil {
		return nil, "", fmt.Errorf("loadtest: temp state dir: %w", err)
	}
	cfg := gateway.Config{StateDir: dir, Listen: "127.0.0.1:0", Host: inProcessHost, Logger: log}
	cfg.File.Herdr.Disabled = true
	g, err := gateway.Open(ctx, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("loadtest: in-process gateway: %w", err)
	}
	go func() {
		if err := g.Run(context.WithoutCancel(ctx)); err != nil {
			log.Error("in-process gateway stopped", "err", err)
		}
	}()
	return g, dir, nil
}

// runPrefix is this run's name prefix, `lt-<run id>`: random, so neither
// real agents nor another run share a name or a group with it.
func runPrefix() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "lt-" + hex.EncodeToString(b), nil
}

// registerIdle registers n idle workers (`<prefix>-idle<i>`) over the admin
// socket; it returns the names it tried, for removal.
func registerIdle(ctx context.Context, stateDir, prefix string, n int) ([]string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-idle%d", prefix, i)
	}
	err := eachName(ctx, names, func(name string) error {
		if _, err := gateway.Ask(stateDir, gateway.Request{Op: "register", Name: name, Role: "worker"}); err != nil {
			return fmt.Errorf("loadtest: registering %s: %w", name, err)
		}
		return nil
	})
	return names, err
}

// removeEntities removes names from the gateway (their inboxes go with
// them); a name that never got registered is no error.
func removeEntities(stateDir string, names []string) error {
	return eachName(context.Background(), names, func(name string) error {
		_, err := gateway.Ask(stateDir, gateway.Request{Op: "remove", Name: name})
		if err != nil && !strings.Contains(err.Error(), "unknown target") {
			return fmt.Errorf("loadtest: removing %s: %w", name, err)
		}
		return nil
	})
}

// eachName calls f for every name, a few at a time (each is one admin
// socket request and one state write); it stops at ctx's end or the
// first error.
func eachName(ctx context.Context, names []string, f func(string) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	next := make(chan string)
	for range min(len(names), 8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				if err := f(name); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	for _, name := range names {
		if ctx.Err() != nil || failed() {
			break
		}
		next <- name
	}
	close(next)
	wg.Wait()
	return cmp.Or(first, ctx.Err())
}

// gatewayRuntime reads the gateway's runtime figures.
func gatewayRuntime(stateDir string) (gateway.RuntimeStats, error) {
	r, err := gateway.Ask(stateDir, gateway.Request{Op: "stats"})
	if err != nil {
		return gateway.RuntimeStats{}, fmt.Errorf("loadtest: gateway stats: %w", err)
	}
	if r.Stats == nil || r.Stats.Runtime == nil {
		return gateway.RuntimeStats{}, errors.New("loadtest: the gateway reports no runtime figures (an older gateway? restart it)")
	}
	return *r.Stats.Runtime, nil
}

func (o ToolOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// reportProgress writes the calls and failures so far every
// ProgressEvery until ctx ends.
func (o ToolOptions) reportProgress(ctx context.Context, eng *Engine) {
	if o.Progress == nil || o.ProgressEvery <= 0 {
		return
	}
	start := time.Now()
	for sleep(ctx, o.ProgressEvery) == nil {
		calls, failed := eng.Ledger.Progress()
		copies, open := eng.Ledger.Outstanding()
		o.progress("loadtest: %3.0f s: %d calls, %d errors, %d copies in flight, %d calls open", time.Since(start).Seconds(), calls, failed, copies, open)
	}
}
