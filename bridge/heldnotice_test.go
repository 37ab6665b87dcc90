package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestHeldFailedSurvivesRestart: a FAILED held for its sender and not
// drained yet is still in the transport (not yet spilled), so a restart
// hands it back. It must be held again, not taken for a copy of one the
// sender already had: the sim found the sends of a removed worker lost
// this way (the seen-set had the notice from its first arrival, and the
// copy the broker gave back was acked and dropped).
func TestHeldFailedSurvivesRestart(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.SpillDelay = time.Hour }) // held in the transport, not in the store
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	f := newFates()
	for i := range 3 {
		f.accept(h.send(s, bridge.SendRequest{Target: "w", Message: fmt.Sprintf("m%d", i)}).MsgID, s.Name)
	}
	h.heldFor("w", 3)
	if err := h.c.Remove(context.Background(), w.GID); err != nil {
		t.Fatal(err)
	}
	h.heldFor("s", 3) // the three FAILEDs, not drained
	h.restart()
	collectReports(t, h, s, f)
	f.check(t)
}
