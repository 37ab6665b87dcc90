package embedded

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// The writer's extra work (store.NewGroupWriterExtraFirst): every commit
// carries what the two journals hold, publishes first, then acks, before
// the writes queued with it, so a settle of a journaled message finds it
// stored. One batch is in flight at a time: the writer is one goroutine.

// journalBatch is what one commit carries from the journals.
type journalBatch struct {
	recs  []*pubRec
	acks  []ackRec
	epoch uint64         // the store's epoch once it commits
	pubs  map[string]int // copies per inbox
	ackN  map[string]int // acks per inbox
}

// keyEpoch (in bktFloor) is the count of commits that carried journal
// work (pendingPubs.epoch).
var keyEpoch = []byte("epoch")

func getEpoch(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bktFloor).Get(keyEpoch); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// journalWork hands the journals' records to the commit being made.
func (t *Transport) journalWork() (func(*bolt.Tx) error, func(error)) {
	t.pmu.Lock()
	b := t.takeBatchLocked()
	t.pmu.Unlock()
	if b == nil {
		return nil, nil
	}
	return func(tx *bolt.Tx) error { return t.applyBatch(tx, b) }, func(err error) { t.batchCommitted(b, err) }
}

// takeBatchLocked takes every journaled record (t.pmu held); they stay in
// the index, for reads, until the commit succeeds. Appends move to the
// other segment if it is empty, so this one can be emptied after.
func (t *Transport) takeBatchLocked() *journalBatch {
	p := &t.pend
	if len(p.recs) == 0 && len(t.toApply) == 0 {
		return nil
	}
	b := &journalBatch{recs: p.recs, acks: t.toApply, epoch: p.epoch + 1, pubs: map[string]int{}, ackN: map[string]int{}}
	p.recs, t.toApply = nil, nil
	for _, r := range b.recs {
		r.taken = true
		for _, tg := range r.targets {
			b.pubs[tg.gid]++
		}
	}
	for _, a := range b.acks {
		b.ackN[a.gid]++
	}
	if other := 1 - p.active; p.unapplied[other] == 0 {
		p.active = other
	}
	p.inflight = b
	return b
}

// applyBatch stores b's messages, then deletes its acked ones, in tx.
func (t *Transport) applyBatch(tx *bolt.Tx, b *journalBatch) error {
	for _, r := range b.recs {
		for _, tg := range r.targets {
			if err := storeAt(tx, tg.gid, tg.seq, r.raw); err != nil {
				return err
			}
		}
	}
	if err := t.applyAcks(tx, b.acks); err != nil {
		return err
	}
	return tx.Bucket(bktFloor).Put(keyEpoch, binary.BigEndian.AppendUint64(nil, b.epoch))
}

// storeAt puts raw at sequence seq of gid's queue (gone: nothing to do,
// the inbox was deleted meanwhile) and counts it.
func storeAt(tx *bolt.Tx, gid string, seq uint64, raw []byte) error {
	q := tx.Bucket(bktInbox).Bucket([]byte(gid))
	if q == nil {
		return nil
	}
	if err := q.Put(seqKey(seq), raw); err != nil {
		return err
	}
	if seq > q.Sequence() {
		if err := q.SetSequence(seq); err != nil {
			return err
		}
	}
	cnt := tx.Bucket(bktCount)
	return putCount(cnt, []byte(gid), getCount(cnt, []byte(gid))+1)
}

// batchCommitted ends b's commit: its records leave the index and the
// emptied segments are cut, or, when it failed, it is put back to be
// tried with the next commit.
func (t *Transport) batchCommitted(b *journalBatch, err error) {
	// a delivery or count that read the store before this commit also
	// reads the index: wait for it, so none misses the batch (lazyack.go)
	t.snapMu.Lock()
	defer t.snapMu.Unlock()
	t.pmu.Lock()
	defer t.pmu.Unlock()
	p := &t.pend
	p.inflight = nil
	if err != nil {
		t.log.Warn("journaled publishes and acks not yet in the store: trying again with the next commit", "publishes", len(b.recs), "acks", len(b.acks), "err", err)
		for _, r := range b.recs {
			r.taken = false
		}
		p.recs = append(b.recs, p.recs...)
		t.toApply = append(b.acks, t.toApply...)
		// the next commit is asked for here: a publish or ack signals only
		// when it is the first pending, and these were, so with no other
		// write coming they would wait in the journal until a restart
		t.writer.CommitSoon()
		return
	}
	p.epoch = b.epoch
	for _, r := range b.recs {
		p.bytes -= len(r.raw)
		r.taken, r.applied, r.durable = false, true, true
		if r.seg >= 0 {
			p.unapplied[r.seg]--
		}
	}
	p.dropApplied(b.recs)
	t.cutAppliedSegmentsLocked()
	t.acksCommittedLocked(b.acks)
}

// cutAppliedSegmentsLocked empties each segment whose records are all in
// the store. Their syncs are no longer owed: the commit was synced.
func (t *Transport) cutAppliedSegmentsLocked() {
	p := &t.pend
	for i, j := range p.segs {
		if p.unapplied[i] != 0 || j.Size() == 0 {
			continue
		}
		if err := j.Rewrite(nil); err != nil {
			t.log.Warn("publish journal segment not emptied: it keeps records already in the store (a replay skips them)", "segment", i, "err", err)
			continue
		}
		p.dirty[i] = false
	}
}
