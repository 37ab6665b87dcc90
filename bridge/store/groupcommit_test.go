package store

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// extraWork counts what a GroupWriter's commits carried of the work
// queued with CommitSoon: queued is what callers added, committed what
// commits took.
type extraWork struct {
	queued, committed atomic.Int64
}

func (e *extraWork) take() (func(*bolt.Tx) error, func(error)) {
	n := e.queued.Load()
	if n == e.committed.Load() {
		return nil, nil
	}
	return func(*bolt.Tx) error { return nil }, func(err error) {
		if err == nil {
			e.committed.Store(n)
		}
	}
}

// Every CommitSoon is carried by a commit within the delay, though only
// the first of a burst signals the writer: work queued while a commit
// is armed, while it runs, and after a CommitNow each gets its commit.
func TestCommitSoonCarriesEveryCall(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var e extraWork
	w := NewGroupWriter(db, e.take, 5*time.Millisecond)
	defer w.Stop()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				e.queued.Add(1)
				w.CommitSoon()
				if g == 0 && i%300 == 0 {
					w.CommitNow()
				}
				if i%500 == 0 {
					time.Sleep(7 * time.Millisecond) // let an armed commit fire between bursts
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for e.committed.Load() != e.queued.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d queued calls never committed: a CommitSoon found the writer armed and no commit came", e.queued.Load()-e.committed.Load(), e.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
	e.queued.Add(1) // a lone call after everything settled still gets its commit
	w.CommitSoon()
	time.Sleep(50 * time.Millisecond)
	if e.committed.Load() != e.queued.Load() {
		t.Fatal("a lone CommitSoon after the burst was never committed")
	}
}
