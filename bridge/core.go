package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge/history"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Core is the bridge core of one gateway.
type Core struct {
	cfg Config
	log *slog.Logger
	tr  Transport
	st  *store.Store

	reg         *registry
	gate        *gate
	mem         *memory
	ledger      *ledger
	reqs        *requests
	turns       *turnBook
	pres        *presence
	seals       *sealBook // peers' HPKE keys (seal.go)
	nudges      nudgeSet
	spawns      spawnClaims
	slots       spawnSlots
	claims      nameClaims    // live stdio sessions' names (nameclaims.go)
	gone        leaving       // entities being removed, for arrivals that find them gone (removal.go)
	deadLater   deadBacklog   // dead-letter records the store refused, written again by the sweeper (fate.go)
	noticeLater noticeBacklog // notices the transport refused, published again by the sweeper (noticeretry.go)
	queues      paneQueues
	spills      *spiller
	hist        *history.Log // nil: no history
	traces      traceWaits   // the TRACEs waiting for answers (trace.go)
	recent      recentPeers  // who each local entity last talked with (recentpeers.go)

	drains drainRelease // the memory big drains leave behind (drainrelease.go)

	resume       map[string][2]string // removals to finish at Start: gid -> cause, why (set by load)
	unmapped     time.Time            // when the sweeper last released the state file's pages (sweep goroutine only)
	claimsPruned time.Time            // when the sweeper last pruned the give-up claims (giveup.go)

	regMu regMutex // serializes Register, Remove and RevokeTokens (they do transport and store I/O)

	lifeMu    leafMutex
	started   bool
	stopping  bool // the gateway cuts every call now: cut asks stay open (Stopping)
	closed    bool
	startedAt time.Time // set by Start, read-only after
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	subs      []Subscription // dead letters, control, presence
}

// New builds a Core; Start starts it. New starts nothing.
func New(cfg Config) (*Core, error) {
	cfg.defaults()
	if cfg.Transport == nil || cfg.Store == nil {
		return nil, errors.New("bridge: config needs a Transport and a Store")
	}
	if !ValidHost(cfg.Host) {
		return nil, fmt.Errorf("bridge: host id %q is not valid (letters, digits, '.', '_', '-'; at most 63)", cfg.Host)
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger, tr: cfg.Transport, st: cfg.Store,
		reg: newRegistry(), gate: newGate(), mem: newMemory(cfg.SeenSize, cfg.MessageTTL, cfg.ClockSkew),
		ledger: newLedger(cfg.Store, cfg.Logger), reqs: newRequests(cfg.Store, cfg.Logger, cfg.RequestsInMemory, cfg.RequestsPerEntityInMemory),
		turns: &turnBook{st: cfg.Store, log: cfg.Logger}, pres: newPresence(), seals: &sealBook{}, spills: newSpiller(cfg.Prefetch),
	}
	if cfg.History.Dir != "" {
		c.hist = newHistory(cfg.History, cfg.Logger, cfg.Now, c.nameOf)
	}
	return c, nil
}

// Host is this gateway's host id.
func (c *Core) Host() string { return c.cfg.Host }

// Config returns the effective configuration (defaults filled in).
func (c *Core) Config() Config { return c.cfg }

// running reports whether the core is between Start and Close.
func (c *Core) running() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	return c.started && !c.closed
}

// Start loads the registry, attaches a consumer to every local inbox and the
// dead-letter queue, and starts the sweeper and the nudge loop (and, across
// hosts, the control and presence consumers). They run until Close.
func (c *Core) Start(ctx context.Context) error {
	c.lifeMu.Lock()
	if c.started {
		c.lifeMu.Unlock()
		return errors.New("bridge: core already started")
	}
	c.started = true
	c.startedAt = c.cfg.Now()
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.lifeMu.Unlock()
	n, err := c.load()
	if err != nil {
		return err
	}
	if err := c.consumeHost(); err != nil {
		return err
	}
	if err := c.startQueues(); err != nil {
		return fmt.Errorf("bridge: restart the pane queues: %w", err)
	}
	if c.hist != nil {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.hist.Run(c.ctx) }()
	}
	if len(c.resume) > 0 {
		c.wg.Add(1)
		go func(pending map[string][2]string) { defer c.wg.Done(); c.resumeRemovals(pending) }(c.resume)
		c.resume = nil
	}
	c.wg.Add(3)
	go c.spillLoop()
	go c.every(c.cfg.SweepEvery, c.sweep)
	go c.every(c.cfg.NudgeEvery/4, c.nudgeDue)
	c.log.Info("bridge core started", "host", c.cfg.Host, "entities", n)
	return nil
}

// load restores what the store keeps: verification's memory, the ledger
// and the turns (before the inboxes attach: a receipt delivered at once
// must find its record, or it would be reported again; an ANSWER, its
// turn), and the registry with a consumer on every inbox.
func (c *Core) load() (int, error) {
	stored, err := c.st.LoadEntities()
	if err != nil {
		return 0, fmt.Errorf("bridge: load registry: %w", err)
	}
	if err := c.mem.load(c.st, c.cfg.Now()); err != nil {
		return 0, fmt.Errorf("bridge: load the seen-set and sender bindings: %w", err)
	}
	if err := c.ledger.load(); err != nil {
		return 0, fmt.Errorf("bridge: load briefs awaiting receipts: %w", err)
	}
	if err := c.reqs.load(c.cfg.Now()); err != nil {
		return 0, fmt.Errorf("bridge: load remembered request ids: %w", err)
	}
	sts := make([]*entState, 0, len(stored))
	c.resume = map[string][2]string{}
	for _, se := range stored {
		if se.Removing != "" { // a removal a crash cut short: finished once started (resumeRemovals)
			c.resume[se.GID] = [2]string{se.RemovingCause, se.Removing}
		}
		st := newEntState(entityOf(se), c.turns)
		st.loadTokens(se.Tokens)
		st.loadSeen(c.seenAtLoad(se.LastSeen), se.LastSeen)
		c.reg.put(st, se.Tokens)
		if se.Profile != "" { // a spawned worker: it holds its slot across the restart
			c.slots.bind(se.GID, se.Profile)
		}
		sts = append(sts, st)
	}
	if err := c.loadTurns(c.startedAt); err != nil {
		return 0, fmt.Errorf("bridge: load open turns: %w", err)
	}
	if held, err := c.loadHeld(); err != nil {
		return 0, fmt.Errorf("bridge: load held messages: %w", err)
	} else if held > 0 {
		c.log.Info("held messages restored", "n", held)
	}
	for _, st := range sts {
		if err := c.attachInbox(st); err != nil {
			return 0, err
		}
	}
	return len(stored), nil
}

// consumeHost attaches the host's own consumers: dead letters, then (after
// reporting briefs typed before a crash) control and presence.
func (c *Core) consumeHost() error {
	sub, err := c.tr.ConsumeDeadLetters(c.ctx, c.onDeadLetter)
	if err != nil {
		return fmt.Errorf("bridge: consume dead letters: %w", err)
	}
	c.addSub(sub)
	if err := c.typedBeforeCrash(); err != nil {
		return fmt.Errorf("bridge: report briefs typed before a crash: %w", err)
	}
	if ct, ok := c.tr.(ControlTransport); ok {
		sub, err := ct.ConsumeControl(c.ctx, c.cfg.Host, c.onControl)
		if err != nil {
			return err
		}
		c.addSub(sub)
	}
	if pt, ok := c.tr.(PresenceTransport); ok {
		sub, err := pt.ConsumePresence(c.ctx, c.cfg.Host, c.onPresence)
		if err != nil {
			return err
		}
		c.addSub(sub)
		c.wg.Add(1)
		go c.presenceLoop(pt)
	}
	return nil
}

func (c *Core) addSub(s Subscription) {
	c.lifeMu.Lock()
	c.subs = append(c.subs, s)
	c.lifeMu.Unlock()
}

// Stopping says the gateway is about to cut every call (it stops serving,
// then closes the core): an ask whose call is cut from now on stays open
// (persisted, to be resumed after the restart) instead of being abandoned.
// Close implies it.
func (c *Core) Stopping() {
	c.lifeMu.Lock()
	c.stopping = true
	c.lifeMu.Unlock()
}

// IsStopping reports whether Stopping (or Close) was called: a call cut
// now was cut by the gateway's stop, whatever else ended its context.
func (c *Core) IsStopping() bool { return c.isStopping() }

// isStopping reports whether Stopping (or Close) was called.
func (c *Core) isStopping() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	return c.stopping || c.closed
}

// Close stops consumers and loops. Held messages stay where they are: in
// the store, or unacked in the transport (delivered again on the next
// start). Idempotent.
func (c *Core) Close() error {
	c.lifeMu.Lock()
	if c.closed || !c.started {
		c.closed = true
		c.lifeMu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel()
	host := c.subs
	c.lifeMu.Unlock()
	var subs []Subscription
	for _, st := range c.reg.all() {
		st.mu.Lock()
		if sub := st.takeSub(); sub != nil {
			subs = append(subs, sub)
		}
		st.endWaiters()
		st.mu.Unlock()
	}
	for _, s := range append(subs, host...) { // inboxes first, then the host's own consumers
		s.Cancel()
	}
	c.wg.Wait()
	c.mem.save(c.st, c.cfg.Now(), c.log)
	return nil
}

func (c *Core) inboxSpec(e Entity) InboxSpec {
	return InboxSpec{Groups: e.Groups, MaxLength: c.cfg.InboxMaxLength, MessageTTL: c.cfg.InboxTTL, Expires: c.cfg.InboxExpires}
}

// attachInbox declares st's inbox (re-binding its groups) and attaches
// the consumer, once.
func (c *Core) attachInbox(st *entState) error {
	st.mu.Lock()
	e, has := st.snapshot(), st.sub != nil
	st.mu.Unlock()
	if err := c.tr.DeclareInbox(c.ctx, e.GID, c.inboxSpec(e)); err != nil {
		return fmt.Errorf("bridge: declare inbox of %s: %w", e.Addr(), err)
	}
	if has {
		return nil
	}
	gid := e.GID
	sub, err := c.tr.Consume(c.ctx, gid, c.cfg.Prefetch, func(d Delivery) { c.deliver(gid, d) })
	if err != nil {
		return fmt.Errorf("bridge: consume inbox of %s: %w", e.Addr(), err)
	}
	st.mu.Lock()
	st.setSub(sub)
	st.mu.Unlock()
	return nil
}

// entityOf and storedOf convert between an entity and its stored record.
func entityOf(r store.Entity) Entity {
	return Entity{GID: r.GID, Name: r.Name, Host: r.Host, Role: Role(r.Role), Groups: r.Groups, PaneID: r.PaneID, Registered: r.Registered,
		Profile: r.Profile, History: r.History, Spawned: r.Spawned}
}

// record is st's stored record (st.mu held).
func (st *entState) record() store.Entity {
	rec := storedOf(st.Entity, st.tokens)
	rec.LastSeen = st.lastSeen
	return rec
}

func storedOf(e Entity, tokens []string) store.Entity {
	return store.Entity{GID: e.GID, Name: e.Name, Host: e.Host, Role: string(e.Role), Groups: append([]string(nil), e.Groups...),
		PaneID: e.PaneID, Registered: e.Registered, Tokens: append([]string(nil), tokens...), Profile: e.Profile, History: e.History, Spawned: e.Spawned}
}
