package bridge

// receiptBox is the part of an entity's record that routes the receipts
// (INJECTED, FAILED, TOO_LATE, ABANDONED, NO_WAITER) of its outgoing
// messages to the calls waiting for them: outgoing msgId -> the call's
// channel. A receipt with no channel here is held or dropped (deliver.go
// reads it). Its entState's mu guards it; the methods run with mu held.
type receiptBox struct {
	receipts map[string]chan *Envelope
}

// routeReceipts routes the receipts of msgID to ch.
func (b *receiptBox) routeReceipts(msgID string, ch chan *Envelope) { b.receipts[msgID] = ch }

// unrouteReceipts stops routing the receipts of msgID: they are held or
// dropped from now on.
func (b *receiptBox) unrouteReceipts(msgID string) { delete(b.receipts, msgID) }

// expectReceipt opens a channel for the receipts of msgID, one of st's
// outgoing messages; done closes it.
func (st *entState) expectReceipt(msgID string) (receipts <-chan *Envelope, done func()) {
	ch := st.openReceipts(msgID)
	return ch, func() {
		st.mu.Lock()
		st.unrouteReceipts(msgID)
		st.mu.Unlock()
	}
}

// openReceipts registers the channel msgID's receipts are handed to.
func (st *entState) openReceipts(msgID string) chan *Envelope {
	ch := make(chan *Envelope, 4)
	st.mu.Lock()
	st.routeReceipts(msgID, ch)
	st.mu.Unlock()
	return ch
}

// expectReceiptKept is expectReceipt for a call whose receipts its entity
// must learn even when the call stops reading before they come: done
// moves what reached the channel unread into the held set, to be drained
// like a receipt that arrived after the call. (A receipt put in the
// channel is acked in its transport at once: dropped here, it would have
// no fate its sender sees.)
func (st *entState) expectReceiptKept(msgID string) (receipts <-chan *Envelope, done func()) {
	ch := st.openReceipts(msgID)
	return ch, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.unrouteReceipts(msgID)
		for {
			select {
			case env := <-ch:
				if env.Kind != KindNoWaiter {
					st.addHeld(newHeld(env, nil)) // acked already: spilled without an ack (spill.go)
				}
			default:
				return
			}
		}
	}
}
