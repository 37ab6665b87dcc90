package embedded

import (
	"errors"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Every settle (and a publish the journal cannot take) is a small write,
// committed by a store.GroupWriter: one transaction and one fsync for
// whatever writes are queued, with the journaled publishes and acks
// (journalwork.go) applied first in the same transaction.

func (t *Transport) startWriter() {
	t.writer = store.NewGroupWriterExtraFirst(t.db, t.journalWork, journalApplyDelay)
}

// write runs fn in a write transaction, possibly shared with other writes.
// fn may run twice (alone, after a shared transaction failed), so it must
// reset whatever it records.
func (t *Transport) write(fn func(*bolt.Tx) error) error {
	err := t.writer.Write(fn)
	if errors.Is(err, store.ErrWriterClosed) {
		return bridge.ErrClosed
	}
	return err
}

// stopWriter finishes every queued write, then stops the writer.
func (t *Transport) stopWriter() { t.writer.Stop() }

// flushJournals commits what the journals hold now, for the few
// operations that read or rewrite the store alone (a deletion, expiry):
// after it, every message accepted before is in the store.
func (t *Transport) flushJournals() error {
	t.pmu.Lock()
	idle := len(t.pend.recs) == 0 && len(t.toApply) == 0 && t.pend.inflight == nil
	t.pmu.Unlock()
	if idle {
		return nil
	}
	return t.write(func(*bolt.Tx) error { return nil })
}
