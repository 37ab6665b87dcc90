package embedded

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// fillDisk makes every write of tr fail until the returned free is called,
// as a full disk does: the ack journal's appends (its file is closed) and
// every commit, journal work or not.
func fillDisk(t *testing.T, tr *Transport, path string) (free func()) {
	t.Helper()
	var full atomic.Bool
	tr.writer.Stop()
	tr.writer = store.NewGroupWriterExtraFirst(tr.db, func() (func(*bolt.Tx) error, func(error)) {
		apply, done := tr.journalWork()
		if !full.Load() {
			return apply, done
		}
		if done == nil {
			done = func(error) {}
		}
		return func(*bolt.Tx) error { return fmt.Errorf("simulated: %w", syscall.ENOSPC) }, done
	}, 50*time.Millisecond)
	tr.pmu.Lock()
	_ = tr.journal.Close()
	tr.pmu.Unlock()
	full.Store(true)
	return func() {
		j, _, _, err := store.OpenJournal(path + ackJournalSuffix)
		if err != nil {
			t.Fatal(err)
		}
		tr.pmu.Lock()
		tr.journal = j
		tr.pmu.Unlock()
		full.Store(false)
	}
}

// storedCount is gid's message count in the store.
func storedCount(t *testing.T, tr *Transport, gid string) uint64 {
	t.Helper()
	var n uint64
	if err := tr.db.View(func(tx *bolt.Tx) error { n = getCount(tx.Bucket(bktCount), []byte(gid)); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A delivery acked (or rejected) while nothing can be written is not left
// with its consumer, whose cursor has passed it: it is counted no more (a
// removal waiting for the inbox to empty is not held up by it), settled by
// the first commit once the disk has room, and not delivered again after a
// restart. A rejection keeps its reason: its dead letter is there.
func TestSettleOnFullDiskIsKeptAndApplied(t *testing.T) {
	for _, reject := range []bool{false, true} {
		t.Run(fmt.Sprintf("reject=%v", reject), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			gid := uuid.NewString()
			h := openLazy(t, path, gid)
			h.publish("one")
			d := h.next()
			if err := h.tr.flushJournals(); err != nil {
				t.Fatal(err)
			}
			free := fillDisk(t, h.tr, path)
			var err error
			if reject {
				err = d.Acker.Reject("a reason")
			} else {
				err = d.Acker.Ack()
			}
			if err == nil {
				t.Fatal("settle succeeded with the disk full: it is not durable, and must say so")
			}
			if n := h.tr.Depth(gid); n != 0 {
				t.Fatalf("depth %d after the settle the disk refused, want 0 (kept pending)", n)
			}
			if n := storedCount(t, h.tr, gid); n != 1 {
				t.Fatalf("store holds %d while the disk is full, want 1", n)
			}
			free()
			deadline := time.Now().Add(5 * time.Second)
			for storedCount(t, h.tr, gid) != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the kept settle was never applied once the disk had room")
				}
				time.Sleep(10 * time.Millisecond)
			}
			dead := h.tr.deadLetterCount(t)
			if want := map[bool]int{false: 0, true: 1}[reject]; dead != want {
				t.Fatalf("%d dead letters, want %d", dead, want)
			}
			h.sub.Cancel()
			if err := h.tr.Close(); err != nil {
				t.Fatal(err)
			}
			h2 := openLazy(t, path, gid)
			defer h2.tr.Close()
			h2.quiet()
		})
	}
}

// deadLetterCount counts the dead-letter queue.
func (tr *Transport) deadLetterCount(t *testing.T) int {
	t.Helper()
	n := 0
	if err := tr.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bktDLQ).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
