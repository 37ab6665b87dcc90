package embedded

import (
	"encoding/binary"
	"encoding/json"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// inboxItem is one message a delivery round read.
type inboxItem struct {
	seq   uint64
	rec   record
	bad   error
	acked bool // acked by an earlier consumer, not yet committed
}

// rawItem is one message as read, before it is decoded.
type rawItem struct {
	seq   uint64
	raw   []byte
	acked bool
}

// inStored: seq is among stored (sorted by sequence).
func inStored(stored []rawItem, seq uint64) bool {
	i := sort.Search(len(stored), func(i int) bool { return stored[i].seq >= seq })
	return i < len(stored) && stored[i].seq == seq
}

// readInbox reads up to room of gid's messages after sequence after, from
// the store and the pending index together, in sequence order. Both are
// read under snapMu (R), so a commit's batch is in one or both, never in
// neither (a copy in both is read once). The round stops below the first
// sequence it cannot vouch for: an index entry not yet durable, or past
// the last one it read of a source it did not read to its end, so the
// consumer's cursor never passes a message still to come.
func (t *Transport) readInbox(gid string, after uint64, room int) []inboxItem {
	return t.readInboxBetween(gid, after, room, nil)
}

// readInboxBetween is readInbox with between (tests: nil in production)
// run after the store is read and before the index is.
func (t *Transport) readInboxBetween(gid string, after uint64, room int, between func()) []inboxItem {
	var stored []rawItem
	t.snapMu.RLock()
	_ = t.db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktInbox).Bucket([]byte(gid))
		if q == nil {
			return nil
		}
		cur := q.Cursor()
		for k, v := cur.Seek(seqKey(after + 1)); k != nil && len(stored) < room; k, v = cur.Next() {
			stored = append(stored, rawItem{seq: binary.BigEndian.Uint64(k), raw: append([]byte(nil), v...)})
		}
		return nil
	})
	if between != nil {
		between()
	}
	t.pmu.Lock()
	pending, bound := t.pend.from(gid, after, room)
	acks := t.pendAck[gid]
	merged := stored
	for i := range stored {
		stored[i].acked = acks[stored[i].seq]
	}
	for _, p := range pending {
		if !inStored(stored, p.seq) {
			merged = append(merged, rawItem{seq: p.seq, raw: p.raw, acked: acks[p.seq]})
		}
	}
	t.pmu.Unlock()
	t.snapMu.RUnlock()
	if len(stored) == room && (bound == 0 || stored[room-1].seq+1 < bound) {
		bound = stored[room-1].seq + 1
	}
	sort.Slice(merged, func(i, j int) bool { return merged[i].seq < merged[j].seq })
	// decode only what this round hands out
	var items []inboxItem
	for _, m := range merged {
		if len(items) == room || (bound != 0 && m.seq >= bound) {
			break
		}
		items = append(items, newInboxItem(m.seq, m.raw, m.acked))
	}
	return items
}

func newInboxItem(seq uint64, raw []byte, acked bool) inboxItem {
	it := inboxItem{seq: seq, acked: acked}
	it.bad = json.Unmarshal(raw, &it.rec)
	return it
}
