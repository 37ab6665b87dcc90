package bridge_test

import (
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// A drained message whose record could not be deleted (simulated by
// writing it back) is not held again after a restart: the saved seen-set
// remembers it was drained.
func TestDrainedRecordNotRestored(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	h.send(w, bridge.SendRequest{Target: "p", Message: "once"})
	h.heldFor("p", 1)
	spilled(h, p.GID)
	var raw []byte
	_ = h.st.EachHeld(func(gid string, _ uint64, env []byte) error { raw = append([]byte(nil), env...); return nil })
	if got := h.poll(p, bridge.PollRequest{}); len(got.Messages) != 1 {
		t.Fatalf("drain: %+v", got.Messages)
	}
	if _, err := h.st.PutHeld([]store.HeldPut{{GID: p.GID, Env: raw}}); err != nil { // the delete that failed
		t.Fatal(err)
	}
	h.restart() // Close saves the seen-set, which remembers the msgId
	if got := h.poll(p, bridge.PollRequest{}); len(got.Messages) != 0 {
		t.Fatalf("drained again after the restart: %v (its msgId is in the saved seen-set)", bodiesOf(got.Messages))
	}
}
