package embedded

import (
	"errors"
	"fmt"

	"github.com/herdbridge/herdbridge/bridge"
)

// Settles the store cannot take now (a full disk). A delivery whose ack,
// rejection or expiry cannot be written must not stay with its consumer:
// the consumer's cursor has passed it, so it is never delivered again while
// that consumer lives; it counts in its inbox's depth for good (a removal,
// which waits for its inbox to empty, waited its whole bound and then
// deleted the inbox, found by the simulator); and it comes back after a
// restart although it was settled. It is kept pending instead, as a
// journaled ack is — not delivered again, not expired, not counted — and
// the next commit that succeeds applies it (a failed commit puts its
// journal work back and asks for the next one: journalwork.go). Only
// memory holds it until then: a crash first delivers the message again
// (at-least-once, as when an OS crash loses the ack journal's tail).

// settleOrKeep settles seq of ib, dead-lettering it when reason is set. A
// settle the store refuses is kept pending (above) and its error returned
// all the same, so a caller that needs a settle that survives a crash (a
// brief about to be typed) knows it has none.
func (t *Transport) settleOrKeep(ib *inbox, seq uint64, reason string, c *consumer) error {
	err := t.settle(ib.gid, seq, reason, c)
	if err == nil || errors.Is(err, bridge.ErrClosed) {
		return err // closed: the next start delivers it again
	}
	if !t.keepSettle(ib, ackRec{gid: ib.gid, seq: seq, reason: reason}) {
		return nil // its inbox was deleted meanwhile, and the message with it
	}
	t.writer.CommitSoon()
	return fmt.Errorf("%w (kept: the next commit the store takes settles it; a crash before that delivers it again)", err)
}

// keepSettle makes r pending in memory if ib is still its inbox's life.
func (t *Transport) keepSettle(ib *inbox, r ackRec) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inboxes[r.gid] != ib {
		return false
	}
	t.pmu.Lock()
	t.addPendingLocked(r)
	t.pmu.Unlock()
	delete(ib.delivered, r.seq)
	return true
}

// addPendingLocked records r as settled but not committed (t.pmu held) and
// reports whether it is the first such record, which asks for a commit.
func (t *Transport) addPendingLocked(r ackRec) bool {
	set := t.pendAck[r.gid]
	if set == nil {
		set = map[uint64]bool{}
		t.pendAck[r.gid] = set
	}
	set[r.seq] = true
	first := len(t.toApply) == 0
	t.toApply = append(t.toApply, r)
	return first
}
