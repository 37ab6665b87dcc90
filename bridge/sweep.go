package bridge

import "time"

// every runs f every d until the core closes (one of its loops: the
// sweeper, the nudger).
func (c *Core) every(d time.Duration, f func()) {
	defer c.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// sweep enforces expiresAt on held messages and turns (SPEC §4),
// abandons the turns of entities detached past the grace, reports overdue
// receipts, refuses what waited too long for presence, and saves what
// verification remembers.
func (c *Core) sweep() {
	now := c.cfg.Now()
	c.overdueReceipts(now)
	c.flushDead()
	c.flushNotices()
	c.sweepPanes(now)
	c.expirePending(now)
	c.mem.save(c.st, now, c.log)
	c.reqs.prune(now)
	c.pruneClaims(now)
	for _, st := range c.reg.all() {
		c.sweepEntity(st, now)
		c.reapOrSave(st, now)
	}
	if time.Since(c.unmapped) >= unmapEvery {
		// the state file's small writes (the seen-set, turns, drains)
		// fault its pages in over time: give them back now and then
		_ = c.st.ReleaseMapped()
		c.unmapped = time.Now()
	}
}

const unmapEvery = 10 * time.Second

// sweepEntity acks st's held messages past expiresAt (an expired brief is
// reported FAILED to its sender), expires its turns, and abandons them when
// it stayed detached past ReattachGrace.
func (c *Core) sweepEntity(st *entState, now time.Time) {
	var exp []*heldMsg
	var out []outMsg
	st.mu.Lock()
	if st.removed { // its inbox is gone with what it held
		st.mu.Unlock()
		return
	}
	exp = st.claimUnclaimed(func(hm *heldMsg) bool { return !now.Before(hm.head.expiresAt()) })
	st.expireTurns(now)
	if st.graceOver(now, c.cfg.ReattachGrace) {
		out = append(out, c.abandonTurns(st)...)
	}
	st.mu.Unlock()
	c.publishAll(out)
	if len(exp) == 0 {
		return
	}
	us := make([]undelivered, 0, len(exp))
	for _, hm := range exp {
		c.log.Info("held message expired", LogMsgID, hm.head.msgID(), LogTraceID, hm.head.traceID(), LogKind, hm.head.kind, LogGID, st.GID)
		c.observeHead(HopExpire, st.GID, &hm.head, "expired unread")
		us = append(us, undeliveredHeld(hm, st.GID, "inbox of "+st.Addr(), "expired", "expired unread in the inbox of "+st.Name))
	}
	// reported before they leave the store and the transport: a crash in
	// between reports them again (once more at most), never not at all
	c.reportUndelivered(us)
	_ = c.settleTaken(st, exp)
}
