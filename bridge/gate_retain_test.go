package bridge

import (
	"runtime"
	"testing"
	"time"
	"weak"
)

// The deliveries gate.late hands out are not kept by the sender's list it
// filtered in place: the slots past what stays held them (envelope, body,
// acker) for as long as the sender had one delivery still waiting.
func TestGateLateKeepsNoLateDelivery(t *testing.T) {
	g := newGate()
	now := time.Now()
	var refs []weak.Pointer[Envelope]
	for i := range 50 {
		env := &Envelope{MsgID: string(rune('a' + i%26)), Body: make([]byte, 4096)}
		at := now.Add(-time.Hour) // late
		if i == 0 {
			at = now // the one that stays, first, so the rest sit past it
		} else {
			refs = append(refs, weak.Make(env))
		}
		g.pending["sender"] = append(g.pending["sender"], pendingMsg{d: Delivery{Env: env}, at: at, queue: "q"})
		g.pendingN["q"]++
	}
	late := len(g.late(now, time.Minute))
	if late != 49 || len(g.pending["sender"]) != 1 {
		t.Fatalf("late %d, kept %d: want 49 and 1", late, len(g.pending["sender"]))
	}
	kept := stillReachable(refs)
	runtime.KeepAlive(g)
	if kept > 0 {
		t.Fatalf("%d of 49 late deliveries still reachable from the gate's list", kept)
	}
}
