package embedded

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// A publish in two steps: accept numbers its copies and journals them
// (or, when the journal cannot take them, holds their sequences for a
// synchronous commit), under the caps; makeDurable then waits for the
// journal's fdatasync or that commit. Publish returns after both.

// accepted is what accept did with a publish.
type accepted struct {
	rec         *pubRec // in the index (nil: no inbox took a copy)
	unjournaled bool    // the journal refused rec: a commit makes it durable
	raw         []byte
	dead        []routedInbox // at their cap: dead-lettered (maxlen)
	full        bool          // the point-to-point target was at its cap
	stored      int           // targets that still existed
	appendErr   error
	applyNow    bool // the index holds journalApplyBytes: commit at once
}

// accept numbers rec's copies for every routed inbox under its cap and
// journals them as one record. The counts come from one read of the store
// and the index under snapMu (R), so no commit's batch is missed or
// counted twice (storedLocked).
func (t *Transport) accept(targets []routedInbox, key string, rec []byte, now time.Time) accepted {
	t.snapMu.RLock()
	defer t.snapMu.RUnlock()
	counts, epoch := t.storeCounts(targets)
	t.pmu.Lock()
	defer t.pmu.Unlock()
	a := accepted{raw: rec}
	pointToPoint := len(targets) == 1 && targets[0].ib.gid == key
	r := &pubRec{raw: rec, at: now.UnixMilli()}
	for _, rt := range targets {
		gid := rt.ib.gid
		last, ok := t.pend.next[gid]
		if !ok { // deleted meanwhile
			continue
		}
		a.stored++
		if n := t.storedLocked(gid, counts[gid], epoch); rt.cap > 0 && n-min(n, rt.unacked) >= uint64(rt.cap) {
			a.full = a.full || pointToPoint
			a.dead = append(a.dead, rt)
			continue
		}
		t.pend.next[gid] = last + 1
		r.targets = append(r.targets, pubTarget{gid: gid, seq: last + 1})
	}
	if len(r.targets) == 0 {
		return a
	}
	if err := t.appendPubLocked(r); err != nil {
		a.appendErr, a.unjournaled, r.seg = err, true, -1
	}
	t.pend.add(r)
	a.rec, a.applyNow = r, t.pend.bytes >= journalApplyBytes
	return a
}

// storeCounts reads the stored count of each target and the store's
// epoch in one transaction.
func (t *Transport) storeCounts(targets []routedInbox) (map[string]uint64, uint64) {
	counts := make(map[string]uint64, len(targets))
	var epoch uint64
	_ = t.db.View(func(tx *bolt.Tx) error {
		cnt := tx.Bucket(bktCount)
		for _, rt := range targets {
			counts[rt.ib.gid] = getCount(cnt, []byte(rt.ib.gid))
		}
		epoch = getEpoch(tx)
		return nil
	})
	return counts, epoch
}

// storedLocked is how many of gid's messages are stored and not acked,
// given the store's count and epoch as one read saw them (t.pmu held,
// t.snapMu read-held since that read): the index adds the journaled
// copies and takes away the journaled acks, and when that read already
// saw the commit in flight, its batch is not counted twice.
func (t *Transport) storedLocked(gid string, count, epoch uint64) uint64 {
	n := int64(count)
	if b := t.pend.inflight; b != nil && epoch == b.epoch {
		n += int64(b.ackN[gid] - b.pubs[gid])
	}
	n += int64(t.pend.count(gid)) - int64(len(t.pendAck[gid]))
	return uint64(max(n, 0))
}

// makeDurable waits until what accept did is on the disk: the journal's
// fdatasync for a journaled record, a commit for dead letters and for a
// record the journal refused. The consumers of every target are poked
// after, whatever the outcome (a record withdrawn opens their way).
func (t *Transport) makeDurable(a accepted, targets []routedInbox, env *bridge.Envelope) error {
	defer t.pokeTargets(targets, len(a.dead) > 0)
	if a.appendErr != nil && !errors.Is(a.appendErr, store.ErrJournalFull) {
		t.log.Warn("publish journal not writable: committing the publish synchronously", bridge.LogMsgID, env.MsgID, "err", a.appendErr)
	}
	var err error
	if len(a.dead) > 0 {
		err = t.write(func(tx *bolt.Tx) error { return t.storeDead(tx, a, env) })
	}
	if a.rec == nil {
		return err
	}
	var perr error
	if a.unjournaled {
		perr = t.commitUnjournaled(a.rec)
	} else {
		perr = t.syncJournaled(a.rec, env)
		t.applySoon(a.applyNow)
	}
	if err == nil {
		err = perr
	}
	return err
}

// commitUnjournaled makes a record the journal refused durable by a
// commit of the journal work (which carries it like any other, so a
// count sees it once across the commit: storedLocked). Until then it is
// in the index, not deliverable. When the commits fail it is withdrawn,
// unless a commit under way holds it: then the outcome of that one
// decides.
func (t *Transport) commitUnjournaled(rec *pubRec) error {
	for {
		err := t.write(func(*bolt.Tx) error { return nil })
		t.pmu.Lock()
		switch {
		case rec.applied:
			t.pmu.Unlock()
			return nil
		case err != nil && !rec.taken:
			t.pend.withdraw(rec)
			t.pmu.Unlock()
			return err
		}
		t.pmu.Unlock()
	}
}

// syncJournaled waits for rec's fdatasync; a failing one is replaced by a
// commit. rec becomes deliverable either way: it is in the journal and
// the index, and may yet be delivered, so the sender is told so.
func (t *Transport) syncJournaled(rec *pubRec, env *bridge.Envelope) error {
	err := t.syncThrough(rec.lsn)
	if err != nil {
		t.log.Warn("publish journal fdatasync failed: committing the publish to the store instead", bridge.LogMsgID, env.MsgID, "err", err)
		if cerr := t.write(func(*bolt.Tx) error { return nil }); cerr != nil {
			err = fmt.Errorf("not confirmed on disk (journal: %v; store: %w): it may still be delivered", err, cerr)
		} else {
			err = nil
		}
	}
	t.pmu.Lock()
	rec.durable = true
	t.pmu.Unlock()
	return err
}

// storeDead writes a's dead letters (the copies of inboxes at their cap),
// in tx (it may run twice: it records nothing outside tx).
func (t *Transport) storeDead(tx *bolt.Tx, a accepted, env *bridge.Envelope) error {
	now := t.opts.Now()
	for _, rt := range a.dead {
		if err := t.putDead(tx, env.Headers(), env.Body, bridge.ReasonMaxLen, bridge.InboxQueueName(rt.ib.gid), now); err != nil {
			return err
		}
	}
	return nil
}

// pokeTargets wakes the consumers of a publish's inboxes (and the
// dead-letter consumer when a copy went there).
func (t *Transport) pokeTargets(targets []routedInbox, dead bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rt := range targets {
		if rt.ib.cons != nil {
			rt.ib.cons.poke()
		}
	}
	if dead && t.dlqCons != nil {
		t.dlqCons.poke()
	}
}

// applySoon asks the writer to carry the journaled publishes into the
// store: within journalApplyDelay, or at once (now: past
// journalApplyBytes when accept added the record).
func (t *Transport) applySoon(now bool) {
	if now {
		t.writer.CommitNow()
		return
	}
	t.writer.CommitSoon()
}
