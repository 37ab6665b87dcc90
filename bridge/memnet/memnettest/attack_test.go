package memnettest_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/attacktest"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestAttackerOnNetwork runs the attack suite on signing cores on one
// in-memory network: someone with access to the network publishes raw
// messages with memnet's Inject and captures real ones with a Tap.
func TestAttackerOnNetwork(t *testing.T) {
	attacktest.Run(t, attacktest.Harness{Start: func(t *testing.T, logA, logB slog.Handler) attacktest.Deployment {
		return deployment(t, "evil", func(cfg *bridge.Config) { cfg.Logger = slog.New(logA) }, func(cfg *bridge.Config) { cfg.Logger = slog.New(logB) })
	}})
}

// TestNoPresenceRace runs the suite's presence race: 20 workers on B
// register and reply at once; A's PresenceWait is long enough for a
// heartbeat on a loaded machine (one came after 644 ms at load 14), short
// enough to see the "never" case refused.
func TestNoPresenceRace(t *testing.T) {
	attacktest.RunPresenceRace(t, attacktest.Harness{Start: func(t *testing.T, _, _ slog.Handler) attacktest.Deployment {
		return deployment(t, "late", func(cfg *bridge.Config) { cfg.PresenceWait = 2 * time.Second }, func(*bridge.Config) {})
	}}, 20)
}

// deployment starts gateways a and b (tuned by tuneA, tuneB) and an
// outside host evil that both trust (a compromised peer, whose key the
// attacker holds), and gives the attacker the network's raw doors.
func deployment(t *testing.T, evil string, tuneA, tuneB func(*bridge.Config)) attacktest.Deployment {
	c := memnettest.New(t)
	a := c.Start("a", tuneA)
	b := c.Start("b", tuneB)
	key := newKey(t, evil)
	c.Trust(evil, key.Public())
	c.Converge(t)
	return attacktest.Deployment{A: a.Core, B: b.Core, Evil: evil, EvilKey: key, Stranger: newKey(t, "stranger"),
		Publish: func(t testing.TB, ex, key string, h map[string]any, body []byte) {
			t.Helper()
			if _, err := c.Net.Inject(memnet.Exchange(ex), key, h, body); err != nil {
				t.Fatal(err)
			}
		},
		Tap: func(t testing.TB, ex, key string) func() (map[string]any, []byte, bool) {
			t.Helper()
			tap, err := c.Net.Tap(memnet.Exchange(ex), key)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tap.Close)
			return tap.Get
		},
	}
}
