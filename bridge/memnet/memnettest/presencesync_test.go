package memnettest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// syncLog counts presence-sync log lines of one core.
type syncLog struct{ asks, applied, refused atomic.Int64 }

func (s *syncLog) Enabled(context.Context, slog.Level) bool { return true }
func (s *syncLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.HasPrefix(r.Message, "presence: asking for a snapshot"):
		s.asks.Add(1)
	case strings.HasPrefix(r.Message, "presence: snapshot applied"):
		s.applied.Add(1)
	case strings.HasPrefix(r.Message, "presence: snapshot refused"), r.Message == "message refused":
		s.refused.Add(1)
	}
	return nil
}
func (s *syncLog) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *syncLog) WithGroup(string) slog.Handler      { return s }

func logTo(s *syncLog) func(*bridge.Config) {
	return func(cfg *bridge.Config) { cfg.Logger = slog.New(s) }
}

// TestPresenceSyncRestart: a gateway that restarts starts a new epoch and
// knows nobody: its view of the others does not match their digests, so it
// asks them and applies their snapshots; the others take the restarted
// one's new epoch (its first round sends no deltas: by its digest when its
// set is the same, else by its snapshot).
func TestPresenceSyncRestart(t *testing.T) {
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b")
	b.Register(t, "w1", bridge.RoleWorker)
	b.Register(t, "w2", bridge.RoleWorker)
	a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	la := &syncLog{}
	a = c.Restart(a, logTo(la))
	memnettest.Eventually(t, "the restarted a sees w1 and w2 of b, from b's snapshot", func() bool {
		return a.Sees("w1@b") && a.Sees("w2@b") && la.applied.Load() > 0
	})
	if la.asks.Load() == 0 {
		t.Error("the restarted a never asked b for a snapshot")
	}
	b = c.Restart(b)
	b.Register(t, "w3", bridge.RoleWorker)
	memnettest.Eventually(t, "a sees w1, w2 and w3 of the restarted b, b sees lead", func() bool {
		return a.Sees("w1@b") && a.Sees("w2@b") && a.Sees("w3@b") && b.Sees("lead@a")
	})
}

// TestPresenceSyncLostDelta: deltas a gateway missed (its link was down:
// its roster queue went with it) are made good by b's next heartbeat,
// whose digest does not match: a asks and applies the snapshot — the
// removed entity goes at once, not at the TTL.
func TestPresenceSyncLostDelta(t *testing.T) {
	c := memnettest.New(t)
	la := &syncLog{}
	a := c.Start("a", logTo(la))
	b := c.Start("b")
	w1 := b.Register(t, "w1", bridge.RoleWorker)
	c.Converge(t)
	a.Transport.LinkDown()
	b.Register(t, "w2", bridge.RoleWorker)
	if err := b.Core.Remove(ctx, w1.GID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * memnettest.PresenceEvery)
	asks := la.asks.Load()
	a.Transport.LinkUp()
	up := time.Now()
	memnettest.Eventually(t, "a sees w2 and not w1", func() bool { return a.Sees("w2@b") && !a.Sees("w1@b") })
	if took := time.Since(up); took >= memnettest.PresenceTTL {
		t.Errorf("the missed changes took %v: the TTL, not a snapshot", took)
	}
	if la.asks.Load() == asks || la.applied.Load() == 0 {
		t.Errorf("asks %d → %d, snapshots applied %d", asks, la.asks.Load(), la.applied.Load())
	}
}

// TestPresenceSyncMixedUpgrade: a gateway of the per-entity kind (as
// before issue 25) and one by host see each other's entities, and nobody
// expires: the new one heartbeats every entity while the old is in its
// roster, and reads the old one's heartbeats per entity.
func TestPresenceSyncMixedUpgrade(t *testing.T) {
	c := memnettest.New(t)
	old := c.Start("old", func(cfg *bridge.Config) { cfg.PresencePerEntity = true })
	nw := c.Start("new")
	old.Register(t, "o1", bridge.RoleWorker)
	nw.Register(t, "n1", bridge.RoleWorker)
	c.Converge(t)
	nw.Register(t, "n2", bridge.RoleWorker) // a delta, read as a heartbeat by the old one
	deadline := time.Now().Add(memnettest.PresenceTTL + 5*memnettest.PresenceEvery)
	for time.Now().Before(deadline) {
		if !old.Sees("n1@new") || !nw.Sees("o1@old") {
			t.Fatalf("expired: old sees n1 %v, new sees o1 %v", old.Sees("n1@new"), nw.Sees("o1@old"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !old.Sees("n2@new") {
		t.Error("the old gateway did not take the new one's delta")
	}
}

// TestPresenceSyncRemoveWhileConverging: entities removed right after they
// registered, while the others are still learning the host, are gone
// everywhere and stay gone.
func TestPresenceSyncRemoveWhileConverging(t *testing.T) {
	c := memnettest.New(t, "a", "b", "c")
	hs := c.Hosts()
	b := hs[1]
	var gids []string
	for i := range 10 {
		gids = append(gids, b.Register(t, fmt.Sprintf("w%d", i), bridge.RoleWorker).GID)
	}
	for _, gid := range gids[:3] {
		if err := b.Core.Remove(ctx, gid); err != nil {
			t.Fatal(err)
		}
	}
	want := func(h *memnettest.Host) bool {
		for i := range 10 {
			if h.Sees(fmt.Sprintf("w%d@b", i)) != (i >= 3) {
				return false
			}
		}
		return true
	}
	memnettest.Eventually(t, "a and c see w3…w9 of b, not w0…w2", func() bool { return want(hs[0]) && want(hs[2]) })
	time.Sleep(5 * memnettest.PresenceEvery)
	if !want(hs[0]) || !want(hs[2]) {
		t.Error("a removed entity came back, or a live one went")
	}
}

// TestPresenceSyncRefusesForgedSnapshot: a snapshot page signed by b but
// naming an entity of another host, or over the page bound, is refused
// with a log line; the view of b stays.
func TestPresenceSyncRefusesForgedSnapshot(t *testing.T) {
	c := memnettest.New(t)
	la := &syncLog{}
	a := c.Start("a", logTo(la))
	b := c.Start("b")
	b.Register(t, "w1", bridge.RoleWorker)
	c.Converge(t)
	page := func(entries []bridge.Presence, pad int) []byte {
		pg := bridge.SnapshotPage{Epoch: time.Now().UnixMilli(), Ver: 1, Hash: strings.Repeat("0", 32), N: len(entries), Pages: 1, Entries: entries}
		if pad > 0 {
			pg.Profiles = []string{strings.Repeat("x", pad)}
		}
		raw, _ := json.Marshal(pg)
		return raw
	}
	send := func(body []byte) {
		now := time.Now()
		env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresenceSnapshot, MsgID: uuid.NewString(), From: bridge.GatewayGID("b"),
			To: bridge.GatewayGID("a"), Host: "b", Corr: uuid.NewString(), TS: now, ExpiresAt: now.Add(time.Minute), Body: body}
		env.Sig = b.Key.Sign(env.SigningInput())
		if _, err := c.Net.Inject(memnet.ExchangeControl, "a", env.Headers(), env.Body); err != nil {
			t.Fatal(err)
		}
	}
	before := a.Core.Refused()[bridge.RefuseMalformed]
	send(page([]bridge.Presence{{GID: uuid.NewString(), Name: "forged", Host: "c"}}, 0))
	send(page(nil, 40<<10))
	memnettest.Eventually(t, "both pages refused", func() bool { return a.Core.Refused()[bridge.RefuseMalformed] >= before+2 })
	if !a.Sees("w1@b") || a.Sees("forged@c") {
		t.Errorf("after the forged pages: w1@b %v, forged@c %v", a.Sees("w1@b"), a.Sees("forged@c"))
	}
}
