package bridge_test

import (
	"sync/atomic"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// A held message restored from the store after a restart nudges its
// entity, as one delivered again by the transport would.
func TestRestoredHeldIsNudged(t *testing.T) {
	var nudged atomic.Int64
	h := newHarness(t, func(c *bridge.Config) {
		c.Nudger = bridge.NudgerFunc(func(e bridge.Entity, s bridge.HeldSummary) {
			if e.Name == "p" {
				nudged.Add(1)
			}
		})
	})
	p, w := pair(h)
	h.send(w, bridge.SendRequest{Target: "p", Message: "while you were away"})
	h.heldFor("p", 1)
	spilled(h, p.GID)
	eventually(t, "nudged before the restart", func() bool { return nudged.Load() > 0 })
	h.restart()
	nudged.Store(0)
	h.heldFor("p", 1)
	eventually(t, "p nudged for the message restored from the store", func() bool { return nudged.Load() > 0 })
}
