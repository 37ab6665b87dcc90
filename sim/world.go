package sim

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
	"github.com/herdbridge/herdbridge/bridge/split"
	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/keys"
)

// Tunables of every gateway of a run: short, so a schedule takes a
// second or two; ReapAfter long, so only a reap round (the clock jumping)
// reaps.
const (
	reapAfter  = time.Hour
	staleAfter = 30 * time.Minute
	callWait   = 3 * time.Second // bound of any one call of an action
)

// gateway is one host of a run. mu guards the fields below it; a call
// takes a snapshot (core, epoch) and runs without the lock, so a kill can
// land in the middle of it.
type gateway struct {
	idx   int
	id    string
	dir   string
	key   *keys.HostKey
	panes *panes

	// life serializes a gateway's stops and boots: two restarts in one
	// round run one after the other, never two cores on one store.
	life sync.Mutex

	mu    sync.Mutex
	core  *bridge.Core
	tr    *memnet.Transport // the broker link: a cut takes it down
	split *split.Transport  // what the core publishes on: tr and the local store
	st    *store.Store
	epoch int  // bumped by every restart and kill: results of older calls are void
	up    bool // a core is running
	cut   bool
	full  bool
}

func (g *gateway) snapshot() (*bridge.Core, int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.core, g.epoch, g.up
}

func (g *gateway) sameEpoch(e int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch == e && g.up
}

// handOver settles a drain's handover: delivered if g still runs the
// core that drained (the client read the result), else not (the
// connection died with the gateway, and the messages come again). It
// holds g.mu, so a restart or kill lands before or after it, never in
// between.
func (g *gateway) handOver(epoch int, h *bridge.Handover) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ok := g.epoch == epoch && g.up
	h.Settle(ok)
	return ok
}

// ent is one entity of a run; its gid changes when it registers anew.
type ent struct {
	name string
	host int
	role bridge.Role
	pane string

	mu    sync.Mutex
	gid   string
	alive bool
}

func (e *ent) state() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gid, e.alive
}

func (e *ent) set(gid string, alive bool) {
	e.mu.Lock()
	e.gid, e.alive = gid, alive
	e.mu.Unlock()
}

func (e *ent) pulls() bool { return e.pane == "" }

// world is one run's gateways, entities and accounting.
type world struct {
	sched Schedule
	net   *memnet.Network
	clock *clock
	disks DiskFaults
	log   *slog.Logger
	acct  *ledger
	gws   []*gateway
	ents  map[string]*ent
	order []string // entity names in a stable order

	stallMu sync.Mutex
	stalled []stalled
	// unanswered: asks a primary read whose answer call a restart or kill
	// cut (guarded by stallMu); quiesce answers them again, as an agent
	// whose call failed does
	unanswered []pendingAnswer
	// stops: stops whose call did not say "stopped" (guarded by stallMu;
	// latestop.go)
	stops []orderedStop
}

// pendingAnswer is an ask name read and still owes an answer.
type pendingAnswer struct {
	name, turnID string
}

// stalled is a poll whose client has not read its result yet.
type stalled struct {
	h     *bridge.Handover
	name  string
	gw    *gateway
	epoch int
	msgs  []bridge.Message
	step  int
}

func hostID(i int) string { return fmt.Sprintf("h%d", i) }

func (w *world) addr(name string) string { return name + "@" + hostID(w.ents[name].host) }

// newWorld creates the gateways' keys and trust files and the entities;
// start boots them.
func newWorld(s Schedule, disks DiskFaults, log *slog.Logger) (*world, error) {
	w := &world{sched: s, net: memnet.New(memnet.Options{}), clock: &clock{}, disks: disks, log: log, acct: newLedger(), ents: map[string]*ent{}}
	for i := range s.Hosts {
		dir, err := disks.Dir(hostID(i))
		if err != nil {
			return nil, err
		}
		key, _, err := keys.LoadOrCreate(dir, hostID(i))
		if err != nil {
			return nil, err
		}
		g := &gateway{idx: i, id: hostID(i), dir: dir, key: key}
		g.panes = newPanes(w.acct.typed, w.acct.submitted)
		w.gws = append(w.gws, g)
		for _, e := range []*ent{
			{name: fmt.Sprintf("p%d", i), host: i, role: bridge.RolePrimary},
			{name: fmt.Sprintf("w%d", i), host: i, role: bridge.RoleWorker},
			{name: fmt.Sprintf("pw%d", i), host: i, role: bridge.RoleWorker, pane: fmt.Sprintf("pane%d", i)},
		} {
			e.alive = true // registered by the first boot
			w.ents[e.name] = e
			w.order = append(w.order, e.name)
		}
	}
	for _, g := range w.gws {
		for _, o := range w.gws {
			if o != g {
				if err := keys.Trust(filepath.Join(g.dir, keys.TrustFile), o.id, o.key.Public()); err != nil {
					return nil, err
				}
			}
		}
	}
	return w, nil
}

// boot starts g's core in its state directory and (re-)registers its
// living entities: primaries keep a session attached, so only pull
// workers are ever idle enough to reap.
func (w *world) boot(g *gateway) error {
	ring, err := keys.NewRing(g.dir, g.id, w.log)
	if err != nil {
		return err
	}
	st, err := store.Open(filepath.Join(g.dir, "bridge.db"), 0)
	if err != nil {
		return err
	}
	tr := w.net.Connect()
	sp, err := openSplit(g, tr, w.log)
	if err != nil {
		_ = tr.Close()
		_ = st.Close()
		return err
	}
	cfg := bridge.Config{
		Host: g.id, Transport: sp, Store: st, Logger: w.log.With("host", g.id), Now: w.clock.Now,
		Signer: g.key, Verifier: memnettest.RingVerifier{Ring: ring}, KeyFingerprint: g.key.Fingerprint(), Trusted: ring.Hosts,
		PresenceEvery: memnettest.PresenceEvery, PresenceTTL: memnettest.PresenceTTL, SweepEvery: memnettest.SweepEvery,
		MaxWait: 2 * time.Second, ReceiptWait: time.Second, InjectWait: time.Second, PaneRecheck: 50 * time.Millisecond,
		SpillDelay: 50 * time.Millisecond, ReapAfter: reapAfter, StaleAfter: staleAfter, Injector: g.panes,
	}
	core, err := bridge.New(cfg)
	if err == nil {
		err = core.Start(context.Background())
	}
	if err != nil {
		_ = sp.Close()
		_ = st.Close()
		return err
	}
	sp.Start(core.Undeliverable)
	g.mu.Lock()
	g.core, g.tr, g.split, g.st, g.up, g.cut = core, tr, sp, st, true, false
	g.mu.Unlock()
	for _, name := range w.order {
		if e := w.ents[name]; e.host == g.idx {
			if _, alive := e.state(); alive || e.role == bridge.RolePrimary {
				w.register(g, e)
			}
		}
	}
	return nil
}

// register (re-)registers e on g: the same gid when it is still known.
func (w *world) register(g *gateway, e *ent) {
	core, _, up := g.snapshot()
	if !up {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	got, _, err := core.Register(ctx, bridge.RegisterRequest{Name: e.name, Role: e.role, PaneID: e.pane, NoToken: true})
	if err != nil {
		w.log.Warn("sim: register failed", "name", e.name, "err", err)
		return
	}
	if e.role == bridge.RolePrimary {
		core.Attach(got.GID)
	}
	e.set(got.GID, true)
}

// stop closes g's core: cleanly (a restart), or as a kill -9 looks to
// the broker and to clients — the connection goes first, so nothing more
// is acked or published, and every call still open is void.
func (w *world) stop(g *gateway, kill bool) {
	g.mu.Lock()
	core, tr, sp, st, up := g.core, g.tr, g.split, g.st, g.up
	g.up = false
	g.epoch++
	g.mu.Unlock()
	if !up {
		return
	}
	if kill {
		_ = tr.Close()
	}
	_ = core.Close()
	_ = sp.Close()
	_ = st.Close()
}

// splitBound is how long a cross-host publish waits for a cut link
// before it is spooled: under callWait, so a call whose link dropped
// under it still ends in time.
const splitBound = time.Second

// openSplit is the transport a gateway on a broker runs (gateway.go):
// same-host traffic in an embedded store in its state directory, what
// crosses hosts on the link, spooled in that store's outbox while the
// link is down. So a cut here is the outage a deployment sees: this
// host's own traffic goes on, and sends and notices for other hosts wait.
func openSplit(g *gateway, link *memnet.Transport, log *slog.Logger) (*split.Transport, error) {
	local, err := embedded.Open(filepath.Join(g.dir, "transport.db"), embedded.Options{Logger: log.With("host", g.id)})
	if err != nil {
		return nil, err
	}
	sp, err := split.New(local, link, split.Options{Host: g.id, Bound: splitBound, Logger: log.With("host", g.id)})
	if err != nil {
		_ = local.Close()
		return nil, err
	}
	return sp, nil
}

// converge waits until every running gateway sees every other one's
// living entities, or until the deadline.
func (w *world) converge(deadline time.Time) bool {
	for time.Now().Before(deadline) {
		if w.converged() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func (w *world) converged() bool {
	for _, g := range w.gws {
		core, _, up := g.snapshot()
		if !up {
			continue
		}
		for _, name := range w.order {
			e := w.ents[name]
			if _, alive := e.state(); alive && e.host != g.idx && w.gws[e.host].isUp() {
				if _, err := core.Resolve(w.addr(name)); err != nil {
					return false
				}
			}
		}
	}
	return true
}

func (g *gateway) isUp() bool {
	_, _, up := g.snapshot()
	return up
}

func (w *world) close() {
	for _, g := range w.gws {
		w.stop(g, false)
	}
	w.net.Close()
}
