package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit. bbolt runs one write transaction at a time, each with its
// own fsync, so writers that come together wait for each other's fsyncs
// in turn (twenty panes briefed at once wrote their queue records one
// fsync after another). bbolt's Batch waits MaxBatchDelay for company,
// which a lone write would pay every time. A GroupWriter instead has one
// goroutine take whatever writes are queued — one, or hundreds — run them
// in one transaction and fsync once: no added latency for a lone write,
// one commit for a burst.

// maxGroup bounds the writes of one transaction.
const maxGroup = 1000

// ErrWriterClosed is a write after the GroupWriter stopped.
var ErrWriterClosed = errors.New("store: closed")

type writeOp struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// GroupWriter commits the writes of many goroutines together.
type GroupWriter struct {
	db *bolt.DB
	// extra, when set, is asked at every commit for more work to run in
	// the same transaction (the embedded transport's journaled publishes
	// and acks); done is told the commit's outcome. extraFirst runs it
	// before the queued writes, and alone first when they are isolated:
	// a write may depend on it (a settle of a journaled publish).
	extra      func() (apply func(*bolt.Tx) error, done func(error))
	extraFirst bool

	mu     sync.RWMutex
	closed bool
	writes chan writeOp
	soon   chan struct{}
	// soonArmed is set from a CommitSoon's signal until the commit it
	// asked for begins: the callers between (every send, ack and request
	// record until then) need no signal, and a signal is a wake-up of the
	// writer goroutine, a futex call each (~25 µs of a round trip's CPU).
	// While it is set, a signal is in soon or the writer's timer runs.
	soonArmed atomic.Bool
	now       chan struct{}
	delay     time.Duration
	stop      chan struct{}
	finished  chan struct{}
}

// NewGroupWriter starts the writer goroutine of db. extra may be nil;
// soonDelay is how long CommitSoon waits for a write to carry the extra
// work before committing it alone.
func NewGroupWriter(db *bolt.DB, extra func() (func(*bolt.Tx) error, func(error)), soonDelay time.Duration) *GroupWriter {
	return newGroupWriter(db, extra, false, soonDelay)
}

// NewGroupWriterExtraFirst is NewGroupWriter with the extra work run
// before the queued writes: when the shared transaction fails, the extra
// work is committed alone first, and a failure of it fails the writes
// too (none runs before what it may depend on).
func NewGroupWriterExtraFirst(db *bolt.DB, extra func() (func(*bolt.Tx) error, func(error)), soonDelay time.Duration) *GroupWriter {
	return newGroupWriter(db, extra, true, soonDelay)
}

func newGroupWriter(db *bolt.DB, extra func() (func(*bolt.Tx) error, func(error)), first bool, soonDelay time.Duration) *GroupWriter {
	w := &GroupWriter{db: db, extra: extra, extraFirst: first, writes: make(chan writeOp, maxGroup), soon: make(chan struct{}, 1),
		now: make(chan struct{}, 1), delay: soonDelay, stop: make(chan struct{}), finished: make(chan struct{})}
	go w.run()
	return w
}

// Write runs fn in a write transaction, possibly shared with other writes.
// fn may run twice (alone, after a shared transaction failed), so it must
// reset whatever it records.
func (w *GroupWriter) Write(fn func(*bolt.Tx) error) error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrWriterClosed
	}
	op := writeOp{fn: fn, done: make(chan error, 1)}
	w.writes <- op
	w.mu.RUnlock()
	return <-op.done
}

// CommitSoon asks for a commit within soonDelay even if no write comes,
// so the extra work does not wait for one forever.
func (w *GroupWriter) CommitSoon() {
	if w.soonArmed.Load() || !w.soonArmed.CompareAndSwap(false, true) {
		return
	}
	select {
	case w.soon <- struct{}{}:
	default:
	}
}

// CommitNow asks for a commit of the extra work at once, without waiting
// for soonDelay (the extra work grew large).
func (w *GroupWriter) CommitNow() {
	select {
	case w.now <- struct{}{}:
	default:
	}
}

// Closed reports whether Stop was called.
func (w *GroupWriter) Closed() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.closed
}

// Stop finishes every queued write, then stops the writer. Idempotent.
func (w *GroupWriter) Stop() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.finished
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.finished
}

func (w *GroupWriter) run() {
	defer close(w.finished)
	var soonAt <-chan time.Time
	for {
		var ops []writeOp
		select {
		case <-w.soon:
			if soonAt == nil {
				soonAt = time.After(w.delay)
			}
			continue
		case <-soonAt: // no write came to carry the extra work: commit it alone
			soonAt = nil
			w.soonArmed.Store(false) // before the commit reads the work: what comes after signals again
		case <-w.now:
			soonAt = nil
			w.soonArmed.Store(false)
		case op := <-w.writes:
			ops = append(ops, op)
		case <-w.stop:
			for {
				select {
				case op := <-w.writes:
					w.commit([]writeOp{op})
				default:
					return
				}
			}
		}
	gather:
		for len(ops) < maxGroup {
			select {
			case op := <-w.writes:
				ops = append(ops, op)
			default:
				break gather
			}
		}
		w.commit(ops)
	}
}

// commit runs ops in one transaction, then the extra work.
func (w *GroupWriter) commit(ops []writeOp) {
	apply, done := func(*bolt.Tx) error { return nil }, func(error) {}
	extra := false
	if w.extra != nil {
		if a, d := w.extra(); a != nil {
			apply, done, extra = a, d, true
		}
	}
	if len(ops) == 0 && !extra {
		return
	}
	err := w.db.Update(func(tx *bolt.Tx) error {
		if w.extraFirst {
			if err := apply(tx); err != nil {
				return err
			}
		}
		for _, op := range ops {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		if w.extraFirst {
			return nil
		}
		return apply(tx)
	})
	if err == nil {
		done(nil)
		for _, op := range ops {
			op.done <- nil
		}
		return
	}
	w.isolate(ops, apply, done, extra)
}

// isolate commits what a failed shared transaction held one by one, so
// one failing write fails alone.
func (w *GroupWriter) isolate(ops []writeOp, apply func(*bolt.Tx) error, done func(error), extra bool) {
	if extra && w.extraFirst {
		err := w.db.Update(apply)
		done(err)
		if err != nil {
			for _, op := range ops {
				op.done <- err
			}
			return
		}
	}
	for _, op := range ops {
		op.done <- w.db.Update(op.fn)
	}
	if extra && !w.extraFirst {
		done(w.db.Update(apply))
	}
}
