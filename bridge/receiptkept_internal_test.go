package bridge

import (
	"testing"

	"github.com/google/uuid"
)

// TestReceiptLeftInAClosedCallIsHeld: a receipt that reached an open
// send's channel after the send stopped reading (it returned queued, or
// its wait ran out) and before it deregistered was acked in its transport
// and then dropped with the channel: its sender never learned how its
// brief ended. done now keeps it in the held set; a NO_WAITER (which only
// an ask awaits) is not kept.
func TestReceiptLeftInAClosedCallIsHeld(t *testing.T) {
	st := newEntState(Entity{GID: uuid.NewString(), Name: "boss"}, nil)
	msgID := uuid.NewString()
	receipts, done := st.expectReceiptKept(msgID)
	failed := &Envelope{Kind: KindFailed, MsgID: uuid.NewString(), From: uuid.NewString(), Corr: msgID, Body: []byte("not typed")}
	noWaiter := &Envelope{Kind: KindNoWaiter, MsgID: uuid.NewString(), From: uuid.NewString(), Corr: msgID}
	st.mu.Lock()
	ch := st.receipts[msgID]
	st.mu.Unlock()
	ch <- failed // as onNotice does, under the lock, once the call stopped reading
	ch <- noWaiter
	_ = receipts
	done()
	if hm := st.findHeld(failed.MsgID); hm == nil || hm.env != failed {
		t.Fatalf("the FAILED left in the call's channel is not held: %v", hm)
	}
	if st.findHeld(noWaiter.MsgID) != nil {
		t.Fatal("a NO_WAITER was kept")
	}
	if _, open := st.receipts[msgID]; open {
		t.Fatal("the channel is still registered")
	}
}
