package embedded

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
)

// Group commit. Every publish and settle is a small write; bbolt's own
// Batch waits MaxBatchDelay (10 ms) for company before committing, which a
// lone agent pays on every message. Instead one writer goroutine takes
// whatever writes are queued — one, or hundreds under load — runs them in
// one transaction and fsyncs once: no added latency for a lone write, one
// commit for a burst.

const maxGroup = 1000

type writeOp struct {
	fn   func(*bolt.Tx) error
	done chan error
}

func (t *Transport) startWriter() {
	t.writes = make(chan writeOp, maxGroup)
	t.writerStop = make(chan struct{})
	t.writerDone = make(chan struct{})
	go t.writer()
}

// write runs fn in a write transaction, possibly shared with other writes.
// fn may run twice (alone, after a shared transaction failed), so it must
// reset whatever it records.
func (t *Transport) write(fn func(*bolt.Tx) error) error {
	t.wmu.RLock()
	if t.wclosed {
		t.wmu.RUnlock()
		return bridge.ErrClosed
	}
	op := writeOp{fn: fn, done: make(chan error, 1)}
	t.writes <- op
	t.wmu.RUnlock()
	return <-op.done
}

// stopWriter finishes every queued write, then stops the writer.
func (t *Transport) stopWriter() {
	t.wmu.Lock()
	t.wclosed = true
	t.wmu.Unlock()
	close(t.writerStop)
	<-t.writerDone
}

func (t *Transport) writer() {
	defer close(t.writerDone)
	var applyAt <-chan time.Time // journaled acks waiting for a commit to carry them
	for {
		var ops []writeOp
		select {
		case <-t.ackKick:
			if applyAt == nil {
				applyAt = time.After(ackApplyDelay)
			}
			continue
		case <-applyAt: // no publish came to carry them: commit them alone
			applyAt = nil
		case op := <-t.writes:
			ops = append(ops, op)
		case <-t.writerStop:
			for {
				select {
				case op := <-t.writes:
					t.commit([]writeOp{op})
				default:
					return
				}
			}
		}
	gather:
		for len(ops) < maxGroup {
			select {
			case op := <-t.writes:
				ops = append(ops, op)
			default:
				break gather
			}
		}
		t.commit(ops)
	}
}

// commit runs ops in one transaction, with the journaled acks (lazyack.go)
// after them: the acks ride the fsync the writes pay anyway.
func (t *Transport) commit(ops []writeOp) {
	acks := t.takeAcks()
	if len(ops) == 0 && len(acks) == 0 {
		return
	}
	err := t.db.Update(func(tx *bolt.Tx) error {
		for _, op := range ops {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		return t.applyAcks(tx, acks)
	})
	if err == nil {
		t.acksCommitted(acks, nil)
		for _, op := range ops {
			op.done <- nil
		}
		return
	}
	for _, op := range ops { // isolate the failing write
		op.done <- t.db.Update(op.fn)
	}
	if len(acks) > 0 {
		t.acksCommitted(acks, t.db.Update(func(tx *bolt.Tx) error { return t.applyAcks(tx, acks) }))
	}
}
