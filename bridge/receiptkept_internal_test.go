package bridge

import (
	"log/slog"
	"testing"
	"time"

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
	ch := st.receipts[msgID].ch
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

// countAcker counts its acks.
type countAcker struct{ acks int }

func (a *countAcker) Ack() error          { a.acks++; return nil }
func (a *countAcker) Reject(string) error { return nil }

// TestReceiptLeftInAClosedCallStaysInItsTransport: a receipt that reached
// an open send's box and that the call never read is held for its entity
// with its acker, unacked: until it is spilled or drained its transport
// keeps it, so a restart in between hands it back. It was acked on arrival
// and held in memory only, and a restart within SpillDelay lost it (the
// sim's "no receipt" under restart: typed, and the sender never heard).
func TestReceiptLeftInAClosedCallStaysInItsTransport(t *testing.T) {
	discard := slog.New(slog.DiscardHandler)
	c := &Core{cfg: Config{Now: time.Now, ReceiptWait: time.Second}, log: discard, ledger: newLedger(nil, discard),
		mem: newMemory(64, time.Hour, time.Minute)}
	st := newEntState(Entity{GID: uuid.NewString(), Name: "boss"}, nil)
	msgID := uuid.NewString()
	_, done := st.expectReceiptKept(msgID)
	env := &Envelope{Kind: KindInjected, MsgID: uuid.NewString(), From: uuid.NewString(), To: st.GID, Corr: msgID,
		Body: []byte(StatusSubmitted), ExpiresAt: time.Now().Add(time.Hour)}
	acker := &countAcker{}
	d := Delivery{Env: env, Acker: acker}
	c.settleArrival(st, d, c.arrive(st, d)) // the call has stopped reading: it returned queued
	done()
	hm := st.findHeld(env.MsgID)
	switch {
	case hm == nil:
		t.Fatal("the receipt left in the call's box is not held")
	case acker.acks != 0:
		t.Fatalf("acked %d times while only memory holds it", acker.acks)
	case hm.acks == nil || hm.acks.acker != acker:
		t.Fatal("held without its acker: nothing would ack it once it is spilled or drained")
	case c.mem.has(st.GID + env.MsgID):
		t.Fatal("taken into the seen-set: a copy a restart hands back would be dropped")
	}
}
