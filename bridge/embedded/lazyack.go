package embedded

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Lazy acks (see ackjournal.go for why): an ack is journaled, then applied
// to the store by the next group commit. Until then the message is
// "pending": never delivered again, never expired, not counted in its
// inbox's depth.

// journalApplyDelay is how long journaled publishes and acks wait for a
// write to carry them into the store before the writer commits them
// alone: one commit (two fdatasyncs) a second however many round trips it
// carries. A crash costs nothing of that second (the journals are
// replayed); it only bounds how much the pending index holds, with
// journalApplyBytes.
const journalApplyDelay = time.Second

// journalApplyBytes commits the journaled publishes at once when their
// records reach it, so the pending index stays small in bytes.
const journalApplyBytes = 4 << 20

// lazyAck settles an acked delivery through the journal; a journal that
// cannot be written falls back to a synchronous commit.
//
// An ack of a deleted inbox's message settles nothing (the message went
// with it) and is not journaled: DeleteInbox committed the journals
// already, and a pending ack of a sequence the inbox's next life never
// holds would still be subtracted from that life's depth. t.mu is held
// while journaling (t.mu → pmu), so DeleteInbox, which unlists the inbox
// under t.mu before it commits the journals, sees every ack journaled
// before or none.
func (t *Transport) lazyAck(ib *inbox, seq uint64, c *consumer) error {
	gid := ib.gid
	if t.writer.Closed() {
		return fmt.Errorf("embedded: settle %s/%d: %w", gid, seq, bridge.ErrClosed)
	}
	t.mu.Lock()
	if t.inboxes[gid] != ib {
		t.mu.Unlock()
		c.release(seq)
		return nil
	}
	t.pmu.Lock()
	err := t.journal.Append(encodeAck(ackRec{gid: gid, seq: seq}))
	first := false
	if err == nil {
		first = t.addPendingLocked(ackRec{gid: gid, seq: seq})
	}
	t.pmu.Unlock()
	if err != nil {
		t.mu.Unlock()
		t.log.Warn("ack journal not writable: settling synchronously", "queue", bridge.InboxQueueName(gid), "err", err)
		return t.settleOrKeep(ib, seq, "", c)
	}
	delete(ib.delivered, seq)
	t.mu.Unlock()
	c.release(seq)
	if first {
		t.writer.CommitSoon()
	}
	return nil
}

// pendingAck reports whether gid's message seq is acked but not committed.
func (t *Transport) pendingAck(gid string, seq uint64) bool {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	return t.pendAck[gid][seq]
}

// pendingCount is how many of gid's messages are acked, not committed.
func (t *Transport) pendingCount(gid string) uint64 {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	return uint64(len(t.pendAck[gid]))
}

// applyAcks deletes the acked messages in tx.
func (t *Transport) applyAcks(tx *bolt.Tx, batch []ackRec) error {
	for _, r := range batch {
		if _, err := t.removeTx(tx, r.gid, r.seq, r.reason); err != nil {
			return err
		}
	}
	return nil
}

// acksCommittedLocked ends batch's pending state once its commit
// succeeded, and leaves in the ack journal only what is still to commit
// (t.snapMu write-held, t.pmu held: batchCommitted).
func (t *Transport) acksCommittedLocked(batch []ackRec) {
	if len(batch) == 0 {
		return
	}
	for _, r := range batch {
		if set := t.pendAck[r.gid]; set != nil {
			delete(set, r.seq)
			if len(set) == 0 {
				delete(t.pendAck, r.gid)
			}
		}
	}
	keep := make([][]byte, 0, len(t.toApply))
	for _, r := range t.toApply {
		if r.reason == "" { // a kept rejection or expiry has no record: its reason would be lost on replay
			keep = append(keep, encodeAck(r))
		}
	}
	if err := t.journal.Rewrite(keep); err != nil {
		t.log.Warn("ack journal not rewritten: it keeps acks already committed (replaying them deletes nothing)", "err", err)
	}
}

// replayAcks applies the acks a previous process journaled and did not
// commit (Open, before anything is delivered).
func (t *Transport) replayAcks(path string) error {
	j, payloads, torn, err := store.OpenJournal(path)
	if err != nil {
		return err
	}
	t.journal = j
	if torn > 0 {
		t.log.Warn("ack journal had a torn tail (an OS crash): those messages are delivered again", "bytes", torn)
	}
	var recs []ackRec
	for _, p := range payloads {
		if r, ok := decodeAck(p); ok {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if err := t.db.Update(func(tx *bolt.Tx) error { return t.applyAcks(tx, recs) }); err != nil {
		return fmt.Errorf("embedded: replaying %d journaled acks: %w", len(recs), err)
	}
	t.log.Info("journaled acks applied", "n", len(recs))
	return j.Rewrite(nil)
}

// Sequence numbers never repeat within an inbox's name, across its
// deletion and re-declaration: a journaled ack names (gid, seq), and must
// never name a later message. A deleted inbox raises the floor new inboxes
// start from.
var (
	bktFloor = []byte("seqfloor")
	keyFloor = []byte("n")
)

func raiseSeqFloor(tx *bolt.Tx, seq uint64) error {
	b := tx.Bucket(bktFloor)
	if cur := getFloor(b); seq <= cur {
		return nil
	}
	return b.Put(keyFloor, binary.BigEndian.AppendUint64(nil, seq))
}

func getFloor(b *bolt.Bucket) uint64 {
	if v := b.Get(keyFloor); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
