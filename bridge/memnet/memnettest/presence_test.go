package memnettest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestPresence: every host and its entities appear in every other host's
// roster — a host with no agents too — and a removed entity vanishes from
// them at once (its gone heartbeat), not at the presence TTL.
func TestPresence(t *testing.T) {
	c := memnettest.New(t, "a", "b", "c")
	hs := c.Hosts()
	a, b, hc := hs[0], hs[1], hs[2]
	a.Register(t, "lead", bridge.RolePrimary)
	w := b.Register(t, "w", bridge.RoleWorker, "build")
	c.Converge(t)
	for _, h := range hs {
		for _, o := range hs {
			if !h.SeesHost(o.ID) {
				t.Errorf("%s does not list host %s", h.ID, o.ID)
			}
		}
	}
	for _, e := range hc.Core.Roster().Entities {
		if e.GID == w.GID && (e.Host != "b" || e.Role != bridge.RoleWorker || strings.Join(e.Groups, ",") != "build") {
			t.Errorf("c's roster shows w as %+v", e)
		}
	}
	for _, v := range a.Core.Roster().Hosts {
		if v.Host == "b" && v.Key != b.Key.Fingerprint() {
			t.Errorf("a lists b with key %q, want %q", v.Key, b.Key.Fingerprint())
		}
	}

	removed := time.Now()
	if err := b.Core.Remove(ctx, w.GID); err != nil {
		t.Fatal(err)
	}
	memnettest.Eventually(t, "w gone from a's and c's rosters", func() bool { return !a.Sees("w@b") && !hc.Sees("w@b") })
	if took := time.Since(removed); took >= memnettest.PresenceTTL {
		t.Errorf("a removed entity vanished after %v: at the TTL, not when it was removed", took)
	}
	if !a.SeesHost("b") {
		t.Error("host b vanished with its last entity")
	}
}

// TestPresenceTTL: a host that stops (or is cut off) vanishes from the
// others' rosters with its entities after the presence TTL, and comes back
// with them when its link does; the cut-off host, hearing nobody, forgets
// nobody meanwhile.
func TestPresenceTTL(t *testing.T) {
	quick := func(cfg *bridge.Config) {
		cfg.PresenceEvery, cfg.PresenceTTL = 25*time.Millisecond, 250*time.Millisecond
	}
	c := memnettest.New(t)
	a, b, hc := c.Start("a", quick), c.Start("b", quick), c.Start("c", quick)
	a.Register(t, "lead", bridge.RolePrimary)
	b.Register(t, "w", bridge.RoleWorker)
	hc.Register(t, "x", bridge.RoleWorker)
	c.Converge(t)

	b.Transport.LinkDown()
	memnettest.Eventually(t, "a and c forget the cut-off host b", func() bool {
		return !a.SeesHost("b") && !a.Sees("w@b") && !hc.SeesHost("b")
	})
	if !b.Sees("lead@a") || !b.SeesHost("c") {
		t.Error("the cut-off host forgot the others: deaf, it must not judge them gone")
	}
	b.Transport.LinkUp()
	c.Converge(t)

	c.Stop(hc)
	memnettest.Eventually(t, "a and b forget the stopped host c", func() bool {
		return !a.SeesHost("c") && !a.Sees("x@c") && !b.SeesHost("c") && !b.Sees("x@c")
	})
}

// TestSameHostIDRefused: a second gateway with a host id already running
// on the network does not start, and says why; the first is unaffected.
func TestSameHostIDRefused(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	if _, err := c.TryStart("a"); err == nil || !strings.Contains(err.Error(), "host id") {
		t.Fatalf("second gateway a: err = %v, want a refusal naming the host id", err)
	}
	a := c.Hosts()[0]
	a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
}

// TestRestartedHostLearnsOthersAtOnce: a gateway that restarts knows no
// other host until it hears them; the others answer its first heartbeat
// with theirs at once, so its agents can address them in milliseconds,
// not after a heartbeat period (the soak saw sends refused with "no
// gateway of host …" for up to 5 s after a restart).
func TestRestartedHostLearnsOthersAtOnce(t *testing.T) {
	slow := func(cfg *bridge.Config) { cfg.PresenceEvery, cfg.PresenceTTL = time.Hour, 3*time.Hour }
	c := memnettest.New(t)
	a, b := c.Start("a", slow), c.Start("b")
	a.Register(t, "lead", bridge.RolePrimary)
	b.Register(t, "w", bridge.RoleWorker)
	memnettest.Eventually(t, "b sees lead@a", func() bool { return b.Sees("lead@a") })

	b = c.Restart(b)
	memnettest.Eventually(t, "the restarted b sees lead@a before a's next periodic heartbeat", func() bool { return b.Sees("lead@a") && b.SeesHost("a") })
	if !a.Sees("w@b") {
		t.Error("a lost w@b over b's restart")
	}
}
