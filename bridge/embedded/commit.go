package embedded

import (
	"errors"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Every publish and settle is a small write, committed by a
// store.GroupWriter: one transaction and one fsync for whatever writes are
// queued, with the journaled acks (lazyack.go) applied in the same
// transaction.

func (t *Transport) startWriter() {
	t.writer = store.NewGroupWriter(t.db, t.ackWork, ackApplyDelay)
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

// ackWork hands the journaled acks to the commit being made.
func (t *Transport) ackWork() (func(*bolt.Tx) error, func(error)) {
	acks := t.takeAcks()
	if len(acks) == 0 {
		return nil, nil
	}
	return func(tx *bolt.Tx) error { return t.applyAcks(tx, acks) }, func(err error) { t.acksCommitted(acks, err) }
}
