package embedded

import "time"

// sweepOnce expires what is due in the inboxes no consumer is attached
// to. Expiry reads the store alone, so the journals are committed first,
// outside t.mu, when something is due.
func (t *Transport) sweepOnce() {
	if !t.anyDue() {
		return
	}
	if err := t.flushJournals(); err != nil {
		t.log.Warn("expiring messages postponed: the journals could not be committed", "err", err)
		return
	}
	t.mu.Lock() // held so no consumer attaches mid-sweep
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	dead := 0
	for _, ib := range t.inboxes {
		if ib.cons == nil && ib.meta.MessageTTL > 0 {
			dead += t.expireLocked(ib.gid, 0, ib.meta.MessageTTL)
		}
	}
	if dead > 0 && t.dlqCons != nil {
		t.dlqCons.poke()
	}
}

// anyDue: some inbox without a consumer holds a message past its TTL.
func (t *Transport) anyDue() bool {
	type cand struct {
		gid string
		ttl time.Duration
	}
	var cands []cand
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	for _, ib := range t.inboxes {
		if ib.cons == nil && ib.meta.MessageTTL > 0 {
			cands = append(cands, cand{ib.gid, ib.meta.MessageTTL})
		}
	}
	t.mu.Unlock()
	for _, c := range cands {
		if t.mayExpire(c.gid, 0, c.ttl) {
			return true
		}
	}
	return false
}
