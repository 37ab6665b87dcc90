package bridge_test

import (
	"context"
	"slices"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestRosterCircle: Circle names a primary as its own lead, with the
// workers it exchanged messages with as its team and its recent peers
// newest first; a worker's recent peers include who briefed it; a removed
// entity has none.
func TestRosterCircle(t *testing.T) {
	h := newHarness(t, nil)
	lead := h.reg("lead", bridge.RolePrimary)
	w1 := h.reg("w1", bridge.RoleWorker)
	w2 := h.reg("w2", bridge.RoleWorker)
	h.reg("w3", bridge.RoleWorker) // never talked to
	h.send(lead, bridge.SendRequest{Target: "w1", Message: "do a"})
	h.send(lead, bridge.SendRequest{Target: "w2", Message: "do b"})
	eventually(t, "w1 heard lead", func() bool { return slices.Contains(h.c.Circle(w1.GID).Recent, lead.GID) })
	ci := h.c.Circle(lead.GID)
	if ci.Lead != lead.GID {
		t.Errorf("a primary's lead is %q, want itself", ci.Lead)
	}
	if !slices.Equal(ci.Recent, []string{w2.GID, w1.GID}) {
		t.Errorf("lead's recent %v, want [w2 w1]", ci.Recent)
	}
	if !slices.Contains(ci.Team, w1.GID) || !slices.Contains(ci.Team, w2.GID) || len(ci.Team) != 2 {
		t.Errorf("lead's team %v, want w1 and w2", ci.Team)
	}
	if err := h.c.Remove(context.Background(), w1.GID); err != nil {
		t.Fatal(err)
	}
	if ci := h.c.Circle(w1.GID); ci.Lead != "" || ci.Recent != nil || ci.Team != nil {
		t.Errorf("a removed entity's circle %+v", ci)
	}
}
