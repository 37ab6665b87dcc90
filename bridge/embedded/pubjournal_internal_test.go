package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// FuzzDecodePub: a journal payload that is not a publish record is
// refused, never a panic; one that decodes encodes back to the same bytes.
func FuzzDecodePub(f *testing.F) {
	one, _ := encodePub([]byte(`{"b":"eA=="}`), []pubTarget{{gid: uuid.NewString(), seq: 9}})
	two, _ := encodePub([]byte(`{}`), []pubTarget{{gid: "a", seq: 1}, {gid: "b", seq: 2}})
	f.Add(one)
	f.Add(two)
	f.Add([]byte{'P', 0, 0, 0, 9})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		rec, targets, ok := decodePub(p)
		if !ok {
			return
		}
		again, err := encodePub(rec, targets)
		if err != nil || !bytes.Equal(again, p) {
			t.Fatalf("%x decodes to %q %+v, which encodes differently (%v)", p, rec, targets, err)
		}
	})
}

// A publish whose Publish returned survives a kill -9 before any commit
// carried it: the journal's replay stores it, once.
func TestJournaledPublishSurvivesCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	for _, b := range []string{"one", "two", "three"} {
		h.publish(b)
	}
	if n := h.tr.pendingPublishes(); n == 0 {
		t.Fatal("no publish pending before the crash: the test would prove nothing")
	}
	h.crash()
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	for _, want := range []string{"one", "two", "three"} {
		if d := h2.next(); string(d.Env.Body) != want {
			t.Fatalf("after the crash got %q, want %q", d.Env.Body, want)
		}
	}
	h2.quiet()
	if d := h2.tr.Depth(gid); d != 3 {
		t.Fatalf("depth %d, want 3", d)
	}
}

// --fsync=false means no fdatasync on the publish path either (it paid
// one per publish while only bbolt was told), and a kill -9 still loses
// nothing: the journal's write(2) is in the page cache.
func TestNoSyncPublishWritesWithoutFdatasync(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "t.db")
		gid := uuid.NewString()
		h := openLazyWith(t, path, gid, Options{NoSync: noSync})
		for _, b := range []string{"one", "two"} {
			h.publish(b)
		}
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			h.tr.syncMu.Lock()
			synced := h.tr.syncedLSN
			h.tr.syncMu.Unlock()
			if noSync != (synced == 0) {
				t.Fatalf("NoSync %v: journal synced through record %d", noSync, synced)
			}
		})
		h.crash()
		h2 := openLazyWith(t, path, gid, Options{NoSync: noSync})
		for _, want := range []string{"one", "two"} {
			if d := h2.next(); string(d.Env.Body) != want {
				t.Fatalf("NoSync %v: after the crash got %q, want %q", noSync, d.Env.Body, want)
			}
		}
		h2.tr.Close()
	}
}

// waitCommitted waits until the journals hold nothing a commit has not
// carried.
func waitCommitted(t *testing.T, tr *Transport, gid string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for tr.pendingPublishes() != 0 || tr.pendingCount(gid) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("journals never committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A record left in a segment after its commit (a segment not emptied in
// time, or an emptied one a power loss brought back) stores nothing
// again: not the acked message, not a second copy of the unacked one.
func TestReplayStoresNothingTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	h.publish("acked")
	h.publish("kept")
	waitCommitted(t, h.tr, gid)
	if err := h.next().Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	if d := h.next(); string(d.Env.Body) != "kept" {
		t.Fatalf("got %q", d.Env.Body)
	}
	waitCommitted(t, h.tr, gid)
	var stale []byte // the two records, as the journal had them
	for i, body := range []string{"acked", "kept"} {
		raw := fmt.Sprintf(`{"h":{},"b":%q,"at":%d,"k":%q}`, body, time.Now().UnixMilli(), gid)
		p, _ := encodePub([]byte(raw), []pubTarget{{gid: gid, seq: uint64(i + 1)}})
		stale = store.AppendRecord(stale, p)
	}
	h.crash()
	if err := os.WriteFile(path+pubJournalSuffix+"1", stale, 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	if d := h2.next(); string(d.Env.Body) != "kept" {
		t.Fatalf("after the replay got %q, want the unacked one", d.Env.Body)
	}
	h2.quiet()
	if d := h2.tr.Depth(gid); d != 1 {
		t.Fatalf("depth %d after the replay, want 1", d)
	}
}

// A torn last record (an OS crash mid-append) is cut off; the records
// before it are stored.
func TestTornPublishTailCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	h.publish("whole")
	seg := path + pubJournalSuffix + fmt.Sprint(h.tr.pend.active)
	h.crash()
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{'J', 0, 0, 1, 0, 'P', 1, 2}) // a record cut short
	f.Close()
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	if d := h2.next(); string(d.Env.Body) != "whole" {
		t.Fatalf("got %q", d.Env.Body)
	}
	h2.quiet()
}

// A journal that cannot be written does not fail the publish: it is
// committed synchronously, delivered once, and counted.
func TestUnwritableJournalCommitsSynchronously(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	defer h.tr.Close()
	h.publish("journaled")
	waitCommitted(t, h.tr, gid)
	for _, j := range h.tr.pend.segs { // every append now fails
		j.Close()
	}
	h.publish("synchronous")
	if n := h.tr.pendingPublishes(); n != 0 {
		t.Fatalf("%d publishes pending with no journal", n)
	}
	for _, want := range []string{"journaled", "synchronous"} {
		if d := h.next(); string(d.Env.Body) != want {
			t.Fatalf("got %q, want %q", d.Env.Body, want)
		}
	}
	if d := h.tr.Depth(gid); d != 2 {
		t.Fatalf("depth %d, want 2", d)
	}
}

// Many publishers, one consumer acking, commits landing all the while:
// every message is delivered exactly once, in each publisher's order,
// and the inbox ends empty.
func TestConcurrentPublishesEachDeliveredOnce(t *testing.T) {
	tr, gid, _ := openInbox(t, 100000)
	const publishers, each = 6, 200
	var mu sync.Mutex
	seen := map[string]int{}
	last := map[string]int{}
	done := make(chan struct{})
	var delivered atomic.Int64
	sub, err := tr.Consume(context.Background(), gid, 3, func(d bridge.Delivery) {
		var p, i int
		fmt.Sscanf(string(d.Env.Body), "p%d-%d", &p, &i)
		mu.Lock()
		seen[string(d.Env.Body)]++
		key := fmt.Sprint(p)
		if prev, ok := last[key]; ok && i <= prev {
			t.Errorf("publisher %d: %d delivered after %d", p, i, prev)
		}
		last[key] = i
		mu.Unlock()
		if err := d.Acker.Ack(); err != nil {
			t.Error(err)
		}
		if delivered.Add(1) == publishers*each {
			close(done)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // commits at every moment, not only every journalApplyDelay
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = tr.flushJournals()
			_ = tr.Depth(gid)
		}
	}()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := attackEnv(gid, fmt.Sprintf("p%d-%d", p, i))
				if err := tr.Publish(context.Background(), gid, e, true); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("delivered %d of %d", delivered.Load(), publishers*each)
	}
	close(stop)
	bg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
	if len(seen) != publishers*each {
		t.Errorf("%d distinct of %d", len(seen), publishers*each)
	}
	waitCommitted(t, tr, gid)
	if d := tr.Depth(gid); d != 0 {
		t.Errorf("depth %d at the end, want 0", d)
	}
}

// The cap holds exactly with concurrent publishers and commits landing:
// as many stored as the cap, every other one refused as full.
func TestCapExactWithJournal(t *testing.T) {
	const capN, publishers, each = 50, 4, 40
	tr, gid, _ := openInbox(t, capN)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		prev := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = tr.flushJournals()
			d := tr.Depth(gid)
			if d < prev || d > capN {
				t.Errorf("depth went %d -> %d (cap %d, nothing consumed)", prev, d, capN)
			}
			prev = d
		}
	}()
	var full atomic.Int64
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := attackEnv(gid, fmt.Sprintf("p%d-%d", p, i))
				err := tr.Publish(context.Background(), gid, e, true)
				switch {
				case errors.Is(err, bridge.ErrInboxFull):
					full.Add(1)
				case err != nil:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if d := tr.Depth(gid); d != capN {
		t.Errorf("depth %d, want the cap %d", d, capN)
	}
	if n := full.Load(); n != publishers*each-capN {
		t.Errorf("%d refused as full, want %d", n, publishers*each-capN)
	}
}

// openInbox opens a transport in a fresh directory with one inbox of cap
// maxLen, closed when the test ends.
func openInbox(t *testing.T, maxLen int) (tr *Transport, gid, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "t.db")
	gid = uuid.NewString()
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: maxLen}); err != nil {
		t.Fatal(err)
	}
	return tr, gid, path
}
