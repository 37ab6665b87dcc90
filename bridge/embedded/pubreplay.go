package embedded

import (
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// pubJournalSuffix names the publish journal's segments beside the store
// file: path.pubs.0 and path.pubs.1.
const pubJournalSuffix = ".pubs."

// replayPubs stores the messages a previous process journaled and did not
// commit (Open, before the acks are replayed and anything is delivered),
// then empties both segments.
func (t *Transport) replayPubs(path string) error {
	var payloads [][]byte
	for i := range t.pend.segs {
		j, ps, torn, err := store.OpenJournal(path + pubJournalSuffix + strconv.Itoa(i))
		if err != nil {
			return err
		}
		t.pend.segs[i] = j
		if torn > 0 {
			t.log.Warn("publish journal had a torn tail (an OS crash): its last record was never confirmed to a sender", "segment", i, "bytes", torn)
		}
		payloads = append(payloads, ps...)
	}
	if len(payloads) == 0 {
		return nil
	}
	stored, bad := 0, 0
	err := t.db.Update(func(tx *bolt.Tx) error {
		stored, bad = 0, 0
		base := map[string]uint64{} // each inbox's committed sequence before the replay
		for _, p := range payloads {
			raw, targets, ok := decodePub(p)
			if !ok {
				bad++
				continue
			}
			for _, tg := range targets {
				n, err := replayOne(tx, base, tg, raw)
				if err != nil {
					return err
				}
				stored += n
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("embedded: replaying %d journaled publishes: %w", len(payloads), err)
	}
	if bad > 0 {
		t.log.Warn("publish journal records that do not decode skipped (a damaged file)", "n", bad)
	}
	t.log.Info("journaled publishes applied", "records", len(payloads), "stored", stored)
	for _, j := range t.pend.segs {
		if err := j.Rewrite(nil); err != nil {
			return err
		}
	}
	return nil
}

// replayOne stores one journaled copy unless the store has it already:
// its inbox gone, or its sequence at or below the inbox's committed one
// as it was before the replay began (records come in no sequence order
// across the two segments).
func replayOne(tx *bolt.Tx, base map[string]uint64, tg pubTarget, raw []byte) (int, error) {
	q := tx.Bucket(bktInbox).Bucket([]byte(tg.gid))
	if q == nil {
		return 0, nil
	}
	floor, seen := base[tg.gid]
	if !seen {
		floor = q.Sequence()
		base[tg.gid] = floor
	}
	if tg.seq <= floor || q.Get(seqKey(tg.seq)) != nil {
		return 0, nil
	}
	return 1, storeAt(tx, tg.gid, tg.seq, raw)
}

// loadSequences reads each inbox's committed sequence (Open, after the
// replays): the first a publish gives out follows it, and those up to it
// may have been delivered before (Delivery.Redelivered).
func (t *Transport) loadSequences() error {
	return t.db.View(func(tx *bolt.Tx) error {
		t.pend.epoch = getEpoch(tx)
		for gid, ib := range t.inboxes {
			q := tx.Bucket(bktInbox).Bucket([]byte(gid))
			if q == nil {
				return fmt.Errorf("inbox %s has a binding but no queue", gid)
			}
			ib.loaded = q.Sequence()
			t.pend.next[gid] = ib.loaded
		}
		return nil
	})
}

// numberFrom lets publishes number gid's messages after seq (a declared
// inbox; declared again, it keeps what it gave out).
func (t *Transport) numberFrom(gid string, seq uint64) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if cur, ok := t.pend.next[gid]; !ok || cur < seq {
		t.pend.next[gid] = seq
	}
}

// stopNumbering: a deleted inbox takes no more publishes. It returns the
// last sequence given out, which a publish still writing (synchronously:
// its copy is in no journal) may commit after the deletion: the floor a
// re-declaration numbers from must cover it.
func (t *Transport) stopNumbering(gid string) uint64 {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	last := t.pend.next[gid]
	delete(t.pend.next, gid)
	return last
}

// closeJournals closes the three journal files (Open's failure, Close).
func (t *Transport) closeJournals() error {
	var err error
	for _, j := range append([]*store.Journal{t.journal}, t.pend.segs[:]...) {
		if j == nil {
			continue
		}
		if cerr := j.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
