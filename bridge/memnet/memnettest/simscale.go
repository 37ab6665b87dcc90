package memnettest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// The scale simulation (issue 25, part 4): G gateways × E entities on one
// memnet, counting presence deliveries per host per heartbeat period at
// idle, for G past what one machine can start as processes (100, 1,000).
// What it counts does not depend on how fast a delivery is handled, so it
// makes a delivery cheap where that changes no count — and says so in
// each row's note:
//
//   - signatures are HMAC-SHA256 under a per-host key, not Ed25519: a
//     check is ~1 µs instead of ~55 µs, which at 1,000 hosts is most of
//     the difference between keeping up and a backlog that outlives the
//     heartbeats' TTL (expired copies are then dead-lettered, each one a
//     store commit: the collapse seen at G = 100 before);
//   - _gateway heartbeats carry no trust list (Config.Trusted nil): a
//     trust list names every host, so it makes every heartbeat O(G) bytes
//     (6.5 KB at G = 100) and its decoding O(G) work per delivery;
//   - the entities are registered before the gateways start (a fabric
//     restart): registering 20,000 entities live would push 20 M deltas
//     through one process;
//   - the heartbeat period is longer at large G (simPeriod): deliveries are
//     counted per period and reported at the default 5 s period;
//   - the state stores are on tmpfs (/dev/shm), where there is one: their
//     fdatasyncs are no-ops (see onTmpfs);
//   - a host answers other hosts' starts with at most one extra heartbeat
//     per period (Config.PresenceJoinGap): starting 1,000 gateways one by
//     one otherwise makes every running one heartbeat to all every 250 ms.

// SimRow is one row of the simulation's report (HB_SCALE_JSON).
type SimRow struct {
	Hosts           int    `json:"hosts"`
	EntitiesPerHost int    `json:"entities_per_host"`
	Mode            string `json:"mode"` // by-host | per-entity
	// IntervalS is the heartbeat period the figures are given at: the
	// default, 5 s, whatever period the run used (Note says).
	IntervalS             float64 `json:"interval_s"`
	DeliveriesPerInterval float64 `json:"deliveries_per_interval"` // fabric-wide, on bridge.roster and bridge.control
	DeliveriesPerS        float64 `json:"deliveries_per_s"`        // at IntervalS
	PerHostPerInterval    float64 `json:"per_host_per_interval"`   // the mean of the hosts' queues
	ConvergeS             float64 `json:"converge_s"`              // from the last gateway's start to every gateway holding every entity
	WallS                 float64 `json:"wall_s"`                  // the whole row: seeding, starts, convergence, idle periods
	Note                  string  `json:"note"`
	// MinHost and MaxHost bound one host's deliveries per period (logged,
	// not in the JSON row).
	MinHost, MaxHost float64 `json:"-"`
}

func (r SimRow) String() string {
	return fmt.Sprintf("%d hosts × %d entities, %s: %.0f deliveries per interval (per host %.1f, %.0f…%.0f), %.0f/s at %g s, converged %.1f s after the last start, wall %.0f s",
		r.Hosts, r.EntitiesPerHost, r.Mode, r.DeliveriesPerInterval, r.PerHostPerInterval, r.MinHost, r.MaxHost, r.DeliveriesPerS, r.IntervalS, r.ConvergeS, r.WallS)
}

// simRate is the most deliveries per second of period the simulation
// plans for: what one core handles at ~40 µs each, twice over (while hosts
// start, each sends up to two heartbeats a period), on a shared two-core
// machine (at 20,000 the starts of 1,000 gateways fell behind past 780).
const simRate = 10000

// simPeriod is the heartbeat period of a run: 5 s, or long enough that
// one period's idle deliveries (G² by host, G² × (E+1) per entity) take
// at most a second of period each simRate of them.
func simPeriod(g, e int, perEntity bool) time.Duration {
	n := g * g
	if perEntity {
		n *= e + 1
	}
	return max(5*time.Second, time.Duration(math.Ceil(float64(n)/simRate))*time.Second)
}

// simEntityBudget is the most remote entities the simulation holds across
// its gateways (each holds every other host's: G × (G−1) × E in all). One
// costs ~600 bytes of heap (its entry, its sender binding, the per-host
// index, the map slots: measured at G = 300) and ~200 of state store on
// tmpfs; at 10 M that is ~6 GB live, ~12 GB with the collector's room,
// and ~2 GB of stores on a 24 GiB machine. 1,000 × 20 (20 M) does not fit.
const simEntityBudget = 10_000_000

// SimEntities is how many entities per host the simulation of g hosts
// runs: want, or fewer when g × (g−1) × want is past simEntityBudget. The
// row says so (EntitiesPerHost); by-host traffic does not depend on it.
func SimEntities(g, want int) int {
	return max(1, min(want, simEntityBudget/(g*(g-1))))
}

// SimulatePresence runs g gateways × e entities (perEntity: the presence
// before issue 25) as the scale simulation does (see above), and counts
// the presence deliveries over periods idle periods after convergence.
// It fails the test when the gateways do not converge, or lose entities
// at idle; figures are reported, never held.
func SimulatePresence(t testing.TB, g, e int, perEntity bool, periods int) SimRow {
	t.Helper()
	began := time.Now()
	every := simPeriod(g, e, perEntity)
	onTmpfs(t)
	c := New(t)
	defer c.close()
	ids := make([]string, g)
	for i := range g {
		ids[i] = fmt.Sprintf("h%04d", i)
	}
	sim := simCrypto{}
	tune := func(cfg *bridge.Config) {
		cfg.PresencePerEntity = perEntity
		cfg.PresenceEvery, cfg.PresenceTTL, cfg.PresenceWait, cfg.PresenceJoinGap = every, 4*every, 4*every, every
		cfg.Signer, cfg.Verifier, cfg.Trusted = sim.signer(cfg.Host), sim, nil
		// Fewer timers: 1,000 gateways' sweepers (50 ms here) and nudgers
		// (every 500 ms) kept ~700 goroutines runnable, and every handoff of
		// memnet's one lock (starving: thousands wait for it) waits for its
		// new owner's turn among them. Neither touches presence.
		cfg.SweepEvery, cfg.NudgeEvery = 5*time.Second, time.Minute
		// The seen-set is allocated at its bound (3 MB at the default 65,536,
		// 3 GB for 1,000 gateways); no presence delivery goes through it.
		cfg.SeenSize = 1024
	}
	var seeding time.Duration
	hosts := c.StartAllAfter(ids, func(h *Host) {
		t0 := time.Now()
		seedEntities(t, h, e, tune)
		seeding += time.Since(t0)
	}, tune)
	last := time.Now()
	t.Logf("%d×%d: entities seeded in %v, gateways started in %v", g, e, seeding.Round(time.Millisecond), (last.Sub(began) - seeding).Round(time.Millisecond))
	deadline := last.Add(max(2*time.Minute, 10*every))
	for !converged(hosts, g, e) {
		if time.Now().After(deadline) {
			t.Fatalf("%d×%d: not converged %v after the last start: %s", g, e, time.Since(last).Round(time.Second), spread(hosts))
		}
		time.Sleep(100 * time.Millisecond)
	}
	conv := time.Since(last)
	writeHeapProfile(t)
	time.Sleep(every) // what the starts set off settles
	if !converged(hosts, g, e) {
		t.Fatalf("%d×%d: converged, then lost entities: %s", g, e, spread(hosts))
	}
	before := perHost(c.Net, ids)
	start := time.Now()
	time.Sleep(time.Duration(periods) * every)
	after := perHost(c.Net, ids)
	elapsed := time.Since(start)
	if !converged(hosts, g, e) {
		t.Fatalf("%d×%d: entities expired at idle: %s", g, e, spread(hosts))
	}
	row := simRow(g, e, perEntity, every, float64(elapsed)/float64(every), before, after)
	row.ConvergeS, row.WallS = round1(conv.Seconds()), round1(time.Since(began).Seconds())
	return row
}

// simRow turns the per-host counts before and after the idle periods
// into a row at the default 5 s period.
func simRow(g, e int, perEntity bool, every time.Duration, periods float64, before, after []uint64) SimRow {
	mode := "by-host"
	if perEntity {
		mode = "per-entity"
	}
	row := SimRow{Hosts: g, EntitiesPerHost: e, Mode: mode, IntervalS: 5, MinHost: math.Inf(1)}
	var sum float64
	for i := range before {
		n := float64(after[i]-before[i]) / periods
		sum += n
		row.MinHost, row.MaxHost = math.Min(row.MinHost, n), math.Max(row.MaxHost, n)
	}
	row.DeliveriesPerInterval = math.Round(sum)
	row.DeliveriesPerS = round1(sum / 5)
	row.PerHostPerInterval = round1(sum / float64(g))
	row.Note = fmt.Sprintf("in-process (memnet), simulated: HMAC-SHA256 signatures in place of Ed25519 and no trust lists in heartbeats (counts do not depend on either); "+
		"entities registered before the gateways started (a fabric restart); state stores on %s; heartbeat period %v, one extra heartbeat a period at most for other hosts' starts; counted per period over %.1f idle periods, per second at the default 5 s period",
		storesOn(), every, periods)
	return row
}

// perHost is how many copies each host's roster and control queues took.
func perHost(n *memnet.Network, ids []string) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = n.RoutedTo(memnet.RosterQueue(id)) + n.RoutedTo(memnet.ControlQueue(id))
	}
	return out
}

// writeHeapProfile writes the heap as it is at convergence to
// HB_SCALE_HEAP, when set: where a simulated fabric's memory goes (every
// gateway holds the whole roster).
func writeHeapProfile(t testing.TB) {
	path := os.Getenv("HB_SCALE_HEAP")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("HB_SCALE_HEAP: %v", err)
	}
	defer func() { _ = f.Close() }()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatalf("HB_SCALE_HEAP: %v", err)
	}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// storesOn says where onTmpfs put the stores.
func storesOn() string {
	if os.Getenv("TMPDIR") == "/dev/shm" {
		return "tmpfs (fdatasync a no-op)"
	}
	return "disk"
}

// onTmpfs puts the test's state directories on /dev/shm when there is one:
// a thousand stores on one disk would measure that disk's fdatasyncs (each
// gateway persists every sender binding it learns: at G = 1,000 the starts
// took 7 s each, waiting for syncs), where each gateway has its own.
func onTmpfs(t testing.TB) {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		t.Setenv("TMPDIR", "/dev/shm")
	}
}

// seedEntities registers e entities in h's store before its gateway
// starts, on a network of its own (nobody hears of them until the start).
// The registrations run together: their store writes share commits.
func seedEntities(t testing.TB, h *Host, e int, tune func(*bridge.Config)) {
	t.Helper()
	net := memnet.New(memnet.Options{})
	defer net.Close()
	st, err := store.Open(filepath.Join(h.Dir, "bridge.db"), 0)
	if err != nil {
		t.Fatalf("store of %s: %v", h.ID, err)
	}
	defer func() { _ = st.Close() }()
	tr := net.Connect()
	defer func() { _ = tr.Close() }()
	cfg := bridge.Config{Host: h.ID, Transport: tr, Store: st, Logger: slog.New(slog.DiscardHandler), KeyFingerprint: h.Key.Fingerprint()}
	tune(&cfg)
	core, err := bridge.New(cfg)
	if err == nil {
		err = core.Start(context.Background())
	}
	if err != nil {
		t.Fatalf("seed gateway %s: %v", h.ID, err)
	}
	defer func() { _ = core.Close() }()
	var wg sync.WaitGroup
	errs := make(chan error, e)
	for j := range e {
		wg.Go(func() {
			if _, _, err := core.Register(context.Background(), bridge.RegisterRequest{Name: fmt.Sprintf("w%03d", j), Role: bridge.RoleWorker}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("seed %s: register: %v", h.ID, err)
	}
}

// simCrypto signs and verifies with HMAC-SHA256 under a key derived from
// the host id: a host still signs only as itself, and a change in transit
// is still refused, at a microsecond a check. Simulation only: anyone who
// knows a host id can sign as it.
type simCrypto struct{}

type simSigner struct{ key []byte }

func (simCrypto) signer(host string) simSigner { return simSigner{simKey(host)} }

func simKey(host string) []byte {
	k := sha256.Sum256([]byte("memnettest/simscale/" + host))
	return k[:]
}

// Sign implements bridge.Signer.
func (s simSigner) Sign(msg []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(msg)
	return m.Sum(nil)
}

// Verify implements bridge.Verifier.
func (simCrypto) Verify(host string, msg, sig []byte) error {
	if !hmac.Equal(simSigner{simKey(host)}.Sign(msg), sig) {
		return fmt.Errorf("simulated signature of %s does not verify", host)
	}
	return nil
}
