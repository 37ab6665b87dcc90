package memnettest_test

import (
	"log/slog"
	"testing"

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
		c := memnettest.New(t)
		a := c.Start("a", func(cfg *bridge.Config) { cfg.Logger = slog.New(logA) })
		b := c.Start("b", func(cfg *bridge.Config) { cfg.Logger = slog.New(logB) })
		evil := newKey(t, "evil") // a compromised peer: trusted by A and B
		c.Trust("evil", evil.Public())
		c.Converge(t)
		return attacktest.Deployment{A: a.Core, B: b.Core, Evil: "evil", EvilKey: evil, Stranger: newKey(t, "stranger"),
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
	}})
}
