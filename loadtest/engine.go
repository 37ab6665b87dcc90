package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Target is a running gateway the engine drives agents against.
type Target struct {
	Host     string
	StateDir string // its admin socket is there
	// HerdrSocket is the herdr the gateway types into (pane workers only).
	HerdrSocket string
}

// Panes gives pane workers their herdr panes: a real herdr, or the fake
// (herdr/herdrtest) that tests run next to the gateway.
type Panes interface {
	// NewPane opens a pane with an idle agent on host's herdr.
	NewPane(host, name string) (paneID string, err error)
	// Submitted is every prompt the agent in the pane started a turn on.
	Submitted(host, paneID string) []string
}

// Config is what the engine runs: per gateway, Primaries over streamable
// HTTP, PullWorkers (half over HTTP, half over the stdio relay) and
// PaneWorkers (the stdio relay inside a herdr pane).
type Config struct {
	Bin                                 string // herdbridge, for the stdio relay
	Targets                             []Target
	Primaries, PullWorkers, PaneWorkers int
	Panes                               Panes
	// ActEvery is the mean time between two actions of a primary (a
	// brief, a broadcast, a filtered poll); AskEvery between two asks of a
	// pull worker.
	ActEvery, AskEvery time.Duration
	// Prefix starts every agent's name and the groups the workers join:
	// the load tool gives each run its own (`lt-<run id>`), so neither
	// real agents nor a second run meet its traffic. Empty: names start
	// with the host id, groups are GroupPull and GroupPane (the soak).
	Prefix string
	// Transport is how agents connect: Mixed (or empty: primaries over
	// HTTP, pull workers alternating HTTP and the stdio relay), HTTP or
	// Stdio (every agent; pane workers are always stdio).
	Transport Transport
	// RetryFor bounds how long a send is retried while its gateway is
	// away; past it the call is an error (default 3 minutes: the soak
	// restarts gateways).
	RetryFor time.Duration
	// NoWaits: no brief waits for its reply (wait_s). The soak has one in
	// ten wait, racing the primary's own long poll for the reply; the load
	// tool leaves them out, so a brief's call time is the send alone.
	NoWaits bool
	// TeamSize splits the pull workers into groups of at most this many
	// (the group name, then 0, 1, …), and a broadcast goes to one of
	// them: the load tool's traffic per primary stays the same at any
	// number of workers. 0: one group of them all (the soak).
	TeamSize int
	Logger   *slog.Logger
}

// Groups the workers join, so broadcasts have known recipients (without
// a Prefix).
const (
	GroupPull = "soak-pull"
	GroupPane = "soak-pane"
)

// callTimeout bounds one tool call: above the gateway's 45 s cap on waits.
const callTimeout = 60 * time.Second

// Engine runs agents and their traffic and keeps the ledger.
type Engine struct {
	cfg    Config
	Clock  *Clock
	Ledger *Ledger

	primaries, pull, pane []*Agent
	panes                 map[*Agent]string // pane id of each pane worker
	groupPull, groupPane  string
	// named: every entity the engine registered or tried to, by state
	// dir (an agent whose connect failed half way may exist all the same)
	named map[string][]string

	recvCancel context.CancelFunc
	recv       sync.WaitGroup
}

// New is an engine for cfg (nothing connected yet).
func New(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = 3 * time.Minute
	}
	clock := NewClock()
	e := &Engine{cfg: cfg, Clock: clock, Ledger: NewLedger(clock), panes: map[*Agent]string{},
		groupPull: GroupPull, groupPane: GroupPane, named: map[string][]string{}}
	if cfg.Prefix != "" {
		e.groupPull, e.groupPane = cfg.Prefix+"-pull", cfg.Prefix+"-pane"
	}
	return e
}

// Named is every entity name the engine registered (or tried to) on the
// gateway of stateDir: what to remove after the run.
func (e *Engine) Named(stateDir string) []string {
	return append([]string(nil), e.named[stateDir]...)
}

// Transports counts the connected agents by transport.
func (e *Engine) Transports() map[Transport]int {
	n := map[Transport]int{HTTP: 0, Stdio: 0}
	for _, a := range e.all() {
		n[a.Transport]++
	}
	return n
}

func (e *Engine) all() []*Agent {
	return append(append(append([]*Agent(nil), e.primaries...), e.pull...), e.pane...)
}

// Entities counts the agents by kind.
func (e *Engine) Entities() map[string]int {
	return map[string]int{"primaries (http)": len(e.primaries), "pull workers (http and stdio)": len(e.pull), "pane workers (stdio in a herdr pane)": len(e.pane)}
}

// Connect starts every agent and its receiving loop, and waits until
// every gateway's roster shows every agent (presence crosses hosts).
func (e *Engine) Connect(ctx context.Context) error {
	for _, t := range e.cfg.Targets {
		if err := e.connectTarget(ctx, t); err != nil {
			return err
		}
	}
	if err := e.awaitPresence(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.recvCancel = cancel
	for _, a := range append(append([]*Agent(nil), e.primaries...), e.pull...) {
		e.goRecv(func() { e.pollLoop(rctx, a) })
	}
	for _, a := range e.pane {
		e.goRecv(func() { e.paneLoop(rctx, a) })
	}
	return nil
}

func (e *Engine) goRecv(f func()) {
	e.recv.Add(1)
	go func() { defer e.recv.Done(); f() }()
}

// transportOf is how the i-th agent of a role connects.
func (e *Engine) transportOf(role string, i int) Transport {
	switch {
	case e.cfg.Transport == HTTP || e.cfg.Transport == Stdio:
		return e.cfg.Transport
	case role == "worker" && i%2 == 1:
		return Stdio
	}
	return HTTP
}

// team is the group the i-th pull worker joins.
func (e *Engine) team(i int) string {
	if e.cfg.TeamSize <= 0 {
		return e.groupPull
	}
	return fmt.Sprintf("%s%d", e.groupPull, i/e.cfg.TeamSize)
}

func (e *Engine) connectTarget(ctx context.Context, t Target) error {
	short := strings.ReplaceAll(t.Host, ".", "-")
	if e.cfg.Prefix != "" {
		short = e.cfg.Prefix
	}
	add := func(list *[]*Agent, spec AgentSpec) error {
		e.named[t.StateDir] = append(e.named[t.StateDir], spec.Name)
		a, err := Connect(ctx, e.cfg.Bin, t.StateDir, t.Host, spec)
		if err != nil {
			return err
		}
		*list = append(*list, a)
		return nil
	}
	for i := range e.cfg.Primaries {
		if err := add(&e.primaries, AgentSpec{Name: fmt.Sprintf("%s-lead%d", short, i), Role: "primary", Transport: e.transportOf("primary", i)}); err != nil {
			return err
		}
	}
	for i := range e.cfg.PullWorkers {
		if err := add(&e.pull, AgentSpec{Name: fmt.Sprintf("%s-pull%d", short, i), Role: "worker", Groups: []string{e.team(i)}, Transport: e.transportOf("worker", i)}); err != nil {
			return err
		}
	}
	for i := range e.cfg.PaneWorkers {
		name := fmt.Sprintf("%s-pane%d", short, i)
		id, err := e.cfg.Panes.NewPane(t.Host, name)
		if err != nil {
			return err
		}
		if err := add(&e.pane, AgentSpec{Name: name, Role: "worker", Groups: []string{e.groupPane}, Transport: Stdio, PaneID: id, HerdrSocket: t.HerdrSocket}); err != nil {
			return err
		}
		e.panes[e.pane[len(e.pane)-1]] = id
	}
	return nil
}

// awaitPresence waits until a primary of every gateway resolves every
// agent of every other gateway (bridge_roster's listing shows them).
func (e *Engine) awaitPresence(ctx context.Context) error {
	all := e.all()
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range e.primaries {
		for {
			text, err := rosterListing(ctx, p)
			missing := ""
			for _, a := range all {
				if err == nil && !strings.Contains(text, a.Name) {
					missing = a.Addr()
					break
				}
			}
			if err == nil && missing == "" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never saw %s in its roster (%v)", p.Addr(), missing, err)
			}
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// rosterListing is every page of p's roster listing (bridge_roster with
// list=true; its default answer is a summary), as text.
func rosterListing(ctx context.Context, p *Agent) (string, error) {
	var b strings.Builder
	args := map[string]any{"list": true, "max": 200}
	for range 10000 {
		r, err := p.Call(ctx, "bridge_roster", args, callTimeout)
		if err != nil {
			return "", err
		}
		if r.IsError {
			return "", fmt.Errorf("bridge_roster: %s", r.Text)
		}
		b.WriteString(r.Text)
		if r.Cursor == "" {
			return b.String(), nil
		}
		args = map[string]any{"list": true, "max": 200, "cursor": r.Cursor}
	}
	return "", errors.New("bridge_roster: a listing of more than 10,000 pages")
}

// Run sends traffic for d (or until ctx ends) and returns once every call
// it made has its outcome.
func (e *Engine) Run(ctx context.Context, d time.Duration) {
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range e.primaries {
		wg.Add(1)
		go func() { defer wg.Done(); e.primaryLoop(tctx, p) }()
	}
	for _, w := range e.pull {
		wg.Add(1)
		go func() { defer wg.Done(); e.askLoop(tctx, w) }()
	}
	wg.Wait()
}

// Drain keeps the receivers running until every accepted message is
// delivered or explained, or within passes; it returns how long it took.
func (e *Engine) Drain(ctx context.Context, within time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < within {
		if copies, open := e.Ledger.Outstanding(); copies == 0 && open == 0 {
			break
		}
		if sleep(ctx, 250*time.Millisecond) != nil {
			break
		}
	}
	return time.Since(start)
}

// Close stops the receivers and ends every agent's session.
func (e *Engine) Close() {
	if e.recvCancel != nil {
		e.recvCancel()
	}
	e.recv.Wait()
	for _, a := range e.all() {
		a.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// jitter is d scaled by a random factor in [0.5, 1.5).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

func pick(list []*Agent) *Agent { return list[rand.IntN(len(list))] }
