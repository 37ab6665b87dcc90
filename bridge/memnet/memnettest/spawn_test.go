package memnettest_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// spawner is a fake pane starter: "starting a pane" for a worker counts
// the call and may block on the worker's gate; profile "broken" fails.
// The core registers the worker (gid = spawnId) once its pane started.
type spawner struct {
	profiles []string

	mu    sync.Mutex
	calls map[string]int               // by spawnId
	seen  map[string]bridge.PaneWorker // by worker name: what the core asked for
	gates map[string]chan struct{}     // by worker name: the spawn blocks, once started, until closed
	began chan string                  // spawnIds whose spawn started
}

var _ bridge.PaneStarter = (*spawner)(nil)

func newSpawner(profiles ...string) *spawner {
	return &spawner{profiles: profiles, calls: map[string]int{}, seen: map[string]bridge.PaneWorker{}, gates: map[string]chan struct{}{}, began: make(chan string, 64)}
}

func (s *spawner) ProfileNames() []string { return s.profiles }

func (s *spawner) StartPane(ctx context.Context, w bridge.PaneWorker) (bridge.PaneStarted, error) {
	s.mu.Lock()
	s.calls[w.GID]++
	s.seen[w.Name] = w
	gate := s.gates[w.Name]
	s.mu.Unlock()
	if w.Profile == "broken" {
		return bridge.PaneStarted{}, errors.New("no such agent binary")
	}
	w.Passed(bridge.PhasePaneCreated)
	s.began <- w.GID
	if gate != nil {
		<-gate
	}
	w.Passed(bridge.PhaseAgentStarted)
	w.Passed(bridge.PhaseReady)
	return bridge.PaneStarted{Pane: "pane-" + w.Name}, nil
}

func (s *spawner) ClosePane(context.Context, string) error { return nil }

// worker is what the core asked the spawner to start for name.
func (s *spawner) worker(name string) bridge.PaneWorker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[name]
}

func (s *spawner) callsOf(spawnID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[spawnID]
}

// TestRemoteSpawn: a primary on A spawns on B through B's control queue:
// the worker appears in A's roster with gid = spawnId; a profile B does
// not have is an error listing B's; a spawn that fails returns FAILED
// with B's reason.
func TestRemoteSpawn(t *testing.T) {
	sp := newSpawner("reviewer", "broken")
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Panes = sp })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	memnettest.Eventually(t, "a sees b's profiles", func() bool {
		for _, h := range a.Core.Roster().Hosts {
			if h.Host == "b" && len(h.Profiles) == 2 {
				return true
			}
		}
		return false
	})

	_, err := a.Core.RemoteSpawn(ctx, lead.GID, "b", bridge.SpawnBody{Profile: "nope"}, uuid.NewString(), time.Second)
	wantUserError(t, "unknown profile", err, "reviewer", "broken")

	id := uuid.NewString()
	r, err := a.Core.RemoteSpawn(ctx, lead.GID, "b", bridge.SpawnBody{Profile: "reviewer", Name: "rev"}, id, memnettest.MaxWait)
	if err != nil || r.Status != bridge.StatusConfirmed || r.SpawnID != id || r.Target != "rev@b" {
		t.Fatalf("remote spawn: %+v %v", r, err)
	}
	if e, err := a.Core.Resolve("rev@b"); err != nil || e.GID != id {
		t.Fatalf("the spawned worker as a sees it: %+v %v", e, err)
	}
	if _, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "rev@b", Message: "Review it."}, nil); err != nil {
		t.Fatal(err)
	}
	w, _ := b.Core.Entity(id)
	drainUntil(t, b, w.GID, "Review it.")

	r, err = a.Core.RemoteSpawn(ctx, lead.GID, "b", bridge.SpawnBody{Profile: "broken", Name: "nobody"}, uuid.NewString(), memnettest.MaxWait)
	if err != nil || r.Status != bridge.StatusFailed || len(r.Messages) != 1 || !strings.Contains(r.Messages[0].Body, "no such agent binary") {
		t.Fatalf("failing spawn: %+v %v", r, err)
	}
}

// TestSpawnOnce: a SPAWN is acked only once handled. When B's link drops
// while it spawns, its delivery tag dies and the SPAWN comes back
// redelivered while the first spawn still runs: the second waits for the
// first (same spawnId), finds the worker it made and starts no second
// pane; the first's ack is lost. The very same SPAWN published again (a
// replay, not a redelivery) is refused.
func TestSpawnOnce(t *testing.T) {
	ackLost := watchLog("SPAWN ack failed")
	c := memnettest.New(t)
	a := c.Start("a")
	sp := newSpawner("reviewer")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Logger = slog.New(ackLost); cfg.Panes = sp })
	lead := a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	spawnEnv := func(name string) *bridge.Envelope { // as A's gateway signs one
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSpawn, MsgID: uuid.NewString(), From: lead.GID, To: "control.b",
			Host: "a", SpawnID: uuid.NewString(), TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(`{"profile":"reviewer","name":"` + name + `"}`)}
		e.Sig = a.Key.Sign(e.SigningInput())
		return e
	}
	settled := func() bool {
		ready, unacked, ok := c.Net.Depth(memnet.ControlQueue("b"))
		return ok && ready == 0 && unacked == 0
	}

	gate := make(chan struct{})
	sp.mu.Lock()
	sp.gates["rev2"] = gate
	sp.mu.Unlock()
	e := spawnEnv("rev2")
	if err := a.Transport.PublishControl(ctx, "b", e); err != nil {
		t.Fatal(err)
	}
	if got := <-sp.began; got != e.SpawnID {
		t.Fatalf("spawn %s began, want %s", got, e.SpawnID)
	}
	b.Transport.LinkDown() // mid-spawn: the SPAWN's delivery tag dies with the link
	b.Transport.LinkUp()   // and it comes back redelivered
	close(gate)
	ackLost.wait(t)
	memnettest.Eventually(t, "the redelivered SPAWN settled", settled)
	if n := sp.callsOf(e.SpawnID); n != 1 {
		t.Fatalf("a SPAWN redelivered after its ack was lost ran the spawn %d times", n)
	}

	// a replay of a handled SPAWN (same msgId, not a redelivery): refused
	e = spawnEnv("rev3")
	for i := range 2 {
		if _, err := c.Net.Inject(memnet.ExchangeControl, "b", e.Headers(), e.Body); err != nil {
			t.Fatal(err)
		}
		memnettest.Eventually(t, "the SPAWN settled", settled)
		if i == 0 && sp.callsOf(e.SpawnID) != 1 {
			t.Fatalf("a SPAWN settled without its spawn")
		}
	}
	if n := b.Core.Refused()[bridge.RefuseReplayed]; n != 1 {
		t.Fatalf("replayed SPAWN: %d refused as replayed, want 1 (%v)", n, b.Core.Refused())
	}
	if n := sp.callsOf(e.SpawnID); n != 1 {
		t.Fatalf("a replayed SPAWN ran the spawn %d times", n)
	}
	memnettest.Eventually(t, "a sees both spawned workers", func() bool { return a.Sees("rev2@b") && a.Sees("rev3@b") })
}
