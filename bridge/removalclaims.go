package bridge

import "context"

// What calls still hold of an entity being removed. A call that claimed
// held messages before the removal (a poll handing them over to a client
// that reads slowly, or stalls) decides their fate: handed over, they are
// delivered; given back, they are reported (reportGivenBack). Until then
// each keeps its transport copy unacked with the inbox's consumer. So the
// removal neither waits for them in step 3 (a stalled reader would hold a
// `bridge_stop` or `herdbridge remove` for the whole drain bound) nor
// reports a copy of one that the transport hands back meanwhile (a
// consumer bounce): that copy is swapped in as the one the call settles.

// waitingUnclaimed is what waits in st's closed inbox besides the copies
// of messages calls hold.
func (c *Core) waitingUnclaimed(ctx context.Context, st *entState) (int, error) {
	n, err := c.tr.CloseInbox(ctx, st.GID)
	if err != nil {
		return n, err
	}
	st.mu.Lock()
	held := st.claimedCopies()
	st.mu.Unlock()
	return max(0, n-held), nil
}

// callsHoldCopies says whether a call still holds a message of st whose
// transport copy is unacked.
func (c *Core) callsHoldCopies(st *entState) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.claimedCopies() > 0
}

// consumerAttached says whether st's inbox still has its consumer.
func (c *Core) consumerAttached(st *entState) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sub != nil
}

// copyOfHeld settles an arrival for a removed entity that is a copy of a
// message it took or still holds, as alreadyHere does for a live one: a
// redelivered copy of one a call holds is swapped in for the call to
// settle, a copy of one it took is acked, a replay is refused. false: a
// message it never had, for the caller to report.
func (c *Core) copyOfHeld(st *entState, d Delivery) bool {
	st.mu.Lock()
	a, ok := c.alreadyHere(st, d)
	st.mu.Unlock()
	if ok {
		c.settleArrival(st, d, a)
	}
	return ok
}

// drainAndForget finishes a removal once no call holds its messages (or
// the bound passed): step 3 once more if it left the consumer attached for
// the calls — what arrived meanwhile is reported first — then step 4.
func (c *Core) drainAndForget(ctx context.Context, st *entState) error {
	if c.consumerAttached(st) {
		if err := c.closeAndDrain(ctx, st, removalPoll); err != nil {
			if c.drainGoesOn(st, err) {
				return nil
			}
			c.stopConsumer(st) // out of the registry: Close would not stop it
			return err
		}
		// a call still holding copies past the bound: their acks are void
		// from now on, their fates still the calls'
		c.stopConsumer(st)
	}
	return c.forgetEntity(ctx, st)
}
