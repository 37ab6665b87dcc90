package bridge

import (
	"runtime"
	"testing"
	"time"
	"weak"
)

// A message the spiller has taken is not kept by its queue: the queue's
// backing array outlived the batch (taking advanced past it), so its old
// slots held every message of the last burst — drained and settled, with
// their bodies — until an append outgrew the array, ~750 B a message of
// the last second's send+poll traffic at idle.
func TestSpillerTakeKeepsNoTakenMessage(t *testing.T) {
	s := newSpiller(16)
	const n = 200
	refs := make([]weak.Pointer[heldMsg], 0, n)
	for range n {
		hm := &heldMsg{env: &Envelope{Body: make([]byte, 4096)}}
		refs = append(refs, weak.Make(hm))
		s.push(spillItem{hm: hm, size: len(hm.env.Body)})
	}
	left := 0
	for {
		batch, _ := s.take(time.Now().Add(time.Hour), time.Second)
		if len(batch) == 0 {
			break
		}
		left += len(batch)
	}
	if left != n {
		t.Fatalf("took %d of %d", left, n)
	}
	kept := stillReachable(refs)
	runtime.KeepAlive(s) // the gateway's spiller lives on: only its queue's hold is in question
	if kept > 0 {
		t.Fatalf("%d of %d taken messages (4 KiB bodies) still reachable from the spiller's queue", kept, n)
	}
}
