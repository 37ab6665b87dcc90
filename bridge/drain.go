package bridge

import "sync"

// Draining: held messages are claimed by a call, then either settled
// (acked: the entity has them) or unclaimed (the call went away before
// handing them over) — SPEC §4's ack after the entity has it.

// settleTaken settles messages the entity now has and forgets them: acked
// in the transport when still there, deleted from the store when spilled.
func (c *Core) settleTaken(st *entState, hms []*heldMsg) error {
	// forget them first, under the lock that a delivery holds: a copy of
	// one of them arriving from now on is acked by the seen-set, and none
	// can still swap in an acker that would then never be acked
	var ackers, dups []Acker
	var seqs []uint64
	st.mu.Lock()
	set := map[*heldMsg]bool{}
	for _, hm := range hms {
		set[hm] = true
		c.mem.mark(st.GID+hm.head.msgID(), hm.head.expiresAt().Add(c.mem.skew))
		if hm.acks != nil {
			ackers = append(ackers, hm.acks.acker)
			dups = append(dups, hm.acks.dups...)
			hm.acks = nil
		}
		if hm.seq != 0 {
			seqs = append(seqs, hm.seq)
		}
	}
	c.spills.dropped(st.dropHeld(set))
	c.spillNext(st) // room under the cap, or the message that held the others back is gone
	st.mu.Unlock()
	err := ackAll(ackers)
	for _, a := range dups {
		_ = a.Ack() // a stale tag of an earlier consumer fails: nothing to do
	}
	if derr := c.st.DeleteHeld(st.GID, seqs); derr != nil {
		// the records come back after a restart, and the seen-set (saved
		// on close) refuses them then only if it still remembers them
		c.log.Warn("drained messages not deleted from the store", LogGID, st.GID, "n", len(seqs), "err", derr)
		if err == nil {
			err = derr
		}
	}
	return err
}

// ackAll acks concurrently, so a transport that group-commits settles a
// whole drain in one write instead of one write per message. It returns the
// first error.
func ackAll(ackers []Acker) error {
	if len(ackers) == 1 {
		return ackers[0].Ack()
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for _, a := range ackers {
		wg.Add(1)
		go func(a Acker) {
			defer wg.Done()
			if err := a.Ack(); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}(a)
	}
	wg.Wait()
	return firstErr
}

// unclaim returns messages to the held set when the call that took them
// went away before handing them over; a claimed ASK becomes ABANDONED. An
// entity removed meanwhile holds nothing any more: what its call gives
// back is reported to each sender instead (removal.go).
func (c *Core) unclaim(st *entState, hms []*heldMsg) {
	c.returnToHeld(st, hms, "the waiting call went away before the question was read")
}

// returnHanded takes back what a handover did not deliver (handover.go):
// held again, flagged redelivered when its client may have read it. An
// ASK is never held: one its client cannot have seen is ABANDONED for the
// asker; one it may have seen keeps its turn open — the entity may be
// answering it, and an unanswered turn still ends for the asker, when it
// expires.
func (c *Core) returnHanded(st *entState, hms []*heldMsg, seen bool) {
	// the one trace of a result its client never confirmed: a stalled
	// gateway's cancelled polls show here (TestSigstopUnderLoad counts them)
	c.log.Debug("handed-over messages back to held", LogGID, st.GID, "messages", len(hms), "seen", seen)
	if !seen {
		c.returnToHeld(st, hms, "the question was handed to a call whose client never got it")
		return
	}
	var back, asks []*heldMsg
	st.mu.Lock()
	for _, hm := range hms {
		if hm.head.kind != KindAsk {
			hm.redelivered = true
			back = append(back, hm)
		} else {
			asks = append(asks, hm)
		}
	}
	st.mu.Unlock()
	c.returnToHeld(st, back, "")
	c.settleAsks(st, asks) // its turn stays open: the ASK itself is settled
}

// settleAsks acks ASKs a call was handed (and now let go) in their
// transport and takes them into the seen-set: their turn has its fate
// (answered, abandoned, or open until it expires), so a copy must not
// ask again. An ASK handed to a call stays unacked until then (onAsk): a
// gateway killed first hands it back, to be shown again. So does one
// whose acks all failed (killed after deciding, before its ABANDONED got
// out): it is not taken into the seen-set, and its copy asks again.
func (c *Core) settleAsks(st *entState, hms []*heldMsg) {
	var settled []*heldMsg
	var ackers [][]Acker
	st.mu.Lock()
	for _, hm := range hms {
		if hm.acks != nil {
			settled, ackers = append(settled, hm), append(ackers, hm.acks.all())
			hm.acks = nil
		}
	}
	st.mu.Unlock()
	for i, hm := range settled {
		acked := false
		for _, a := range ackers[i] {
			acked = a.Ack() == nil || acked // a stale tag of an earlier consumer fails: the current one holds
		}
		if acked {
			c.mem.markEnv(st.GID+hm.env.MsgID, hm.env)
		}
	}
}

// returnToHeld makes hms held again, abandoning a claimed ASK with
// askWhy. An entity removed while a call had them cannot hold them: they
// are reported as the removal reported what it held, never dropped.
func (c *Core) returnToHeld(st *entState, hms []*heldMsg, askWhy string) {
	var out []outMsg
	var orphans, asks []*heldMsg
	st.mu.Lock()
	removed, goneWhy := st.removed, st.goneWhy
	for _, hm := range hms {
		if hm.head.kind == KindAsk { // never held, so never spilled: env is here
			if rt := st.turns[hm.env.TurnID]; rt != nil && !rt.answered {
				st.dropRecv(hm.env.TurnID)
				out = append(out, c.noticeFor(KindAbandoned, st.GID, hm.env, askWhy))
			}
			asks = append(asks, hm)
			continue
		}
		if removed {
			orphans = append(orphans, hm) // stays claimed: nobody else takes it
			continue
		}
		st.unclaim(hm)
		if !st.match(hm) {
			c.heldNoWaiter(st)
		}
	}
	if !removed {
		c.spillNext(st)
	}
	st.mu.Unlock()
	c.publishAll(out)
	c.settleAsks(st, asks) // after its ABANDONED is out
	c.reportGivenBack(st, orphans, goneWhy)
}

// reportGivenBack reports messages a call gave back after their entity was
// removed (fate.go), then settles them.
func (c *Core) reportGivenBack(st *entState, hms []*heldMsg, why string) {
	if len(hms) == 0 {
		return
	}
	dep, ok := c.gone.get(st.GID)
	if !ok {
		dep = departure{cause: "removed", why: why}
	}
	if dep.why == "" {
		dep.why = st.Addr() + " was removed while a call held these messages"
	}
	us := make([]undelivered, 0, len(hms))
	for _, hm := range hms {
		us = append(us, undeliveredHeld(hm, st.GID, "inbox of "+st.Addr(), dep.cause, dep.why))
	}
	told, unsent := c.reportOrKeep(us)
	c.log.Info("messages out to a call when their entity was removed: reported", LogGID, st.GID, "n", len(hms), "sendersTold", told)
	// one whose FAILED could not go out stays claimed and unsettled, its
	// store copy kept (forgetWhenSettled): the next start reports it
	if err := c.settleTaken(st, without(hms, unsent)); err != nil {
		c.log.Warn("reported messages of a removed entity not settled", LogGID, st.GID, "err", err)
	}
}
