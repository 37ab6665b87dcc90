package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Adversarial tests of the publish journal (issue 25 item 3): each names
// the interleaving it forces.

func attackEnv(gid, body string) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
		From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
}

// drainBodies consumes gid until quiet and returns the bodies seen, by tag.
func drainBodies(t *testing.T, tr *Transport, gid string) map[string]int {
	t.Helper()
	got := make(chan bridge.Delivery, 64)
	sub, err := tr.Consume(context.Background(), gid, 16, func(d bridge.Delivery) { got <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	seen := map[string]int{}
	for {
		select {
		case d := <-got:
			seen[string(d.Env.Body)]++
			_ = d.Acker.Ack()
		case <-time.After(500 * time.Millisecond):
			return seen
		}
	}
}

// A publish the journal refused took sequence N+1 of an inbox, and its
// synchronous commit is still to run when the inbox is deleted (the
// removal's drain bound ran out: DeleteInbox with a publish in flight) and
// declared again. The deletion raised the floor to the store's committed
// sequence N only, so the new inbox gives N+1 out again: two messages at
// one key, the later Put overwrites the other (lost), and the count says 2.
func TestSyncPublishAcrossDeleteAndRedeclareKeepsBoth(t *testing.T) {
	ctx := context.Background()
	tr, gid, _ := openInbox(t, 100)
	if err := tr.Publish(ctx, gid, attackEnv(gid, "first-life-committed"), true); err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, tr, gid)
	for _, j := range tr.pend.segs { // every append now fails: the synchronous path
		j.Close()
	}
	// a publish of the first life, stopped between accept and its commit
	envS := attackEnv(gid, "first-life-inflight")
	h, hb := splitHeaders(envS.Headers())
	recS, _ := json.Marshal(record{H: h, HB: hb, B: envS.Body, At: time.Now().UnixMilli(), K: gid})
	targets, err := tr.routeSnapshot(gid)
	if err != nil || len(targets) != 1 {
		t.Fatalf("route: %v %d", err, len(targets))
	}
	a := tr.accept(targets, gid, recS, time.Now())
	if !a.unjournaled || len(a.rec.targets) != 1 {
		t.Fatalf("accept: unjournaled %v, want one copy the journal refused (journal closed)", a.unjournaled)
	}
	// the removal gives up waiting, deletes; the entity comes back
	if err := tr.DeleteInbox(ctx, gid); err != nil {
		t.Fatal(err)
	}
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Publish(ctx, gid, attackEnv(gid, "second-life"), true) }()
	time.Sleep(100 * time.Millisecond)
	// the first life's publish commits now
	merr := tr.makeDurable(a, targets, envS)
	tr.published(targets)
	if merr != nil {
		t.Fatal(merr)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	depth := tr.Depth(gid)
	seen := drainBodies(t, tr, gid)
	if seen["second-life"] != 1 {
		t.Errorf("the second life's message delivered %d times, want 1 (seen %v, depth was %d)", seen["second-life"], seen, depth)
	}
	if n := len(seen); depth != seen["second-life"]+seen["first-life-inflight"] || n == 0 {
		t.Errorf("depth %d, but %v delivered", depth, seen)
	}
}

// An ack of the first life is journaled after DeleteInbox flushed the
// journals (a handler acks a delivery its cancelled consumer handed out).
// The inbox is declared again and takes a message: Depth (and so
// CloseInbox, which the core's removal trusts to say "nothing waits")
// subtracts the stale ack from the new life and answers 0.
func TestStaleAckDoesNotHideRedeclaredInboxMessage(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	defer h.tr.Close()
	h.publish("first-life")
	d := h.next()
	if err := h.tr.DeleteInbox(ctx, gid); err != nil {
		t.Fatal(err)
	}
	if err := d.Acker.Ack(); err != nil { // late: the inbox is gone
		t.Fatal(err)
	}
	if err := h.tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	h.publish("second-life")
	if n := h.tr.Depth(gid); n != 1 {
		t.Errorf("Depth %d after the re-declared inbox took one message, want 1", n)
	}
	if n, err := h.tr.CloseInbox(ctx, gid); err != nil || n != 1 {
		t.Errorf("CloseInbox says %d wait (%v), want 1", n, err)
	}
}

// A synchronous publish (the journal refused it) commits with a journaled
// one in the same transaction. A Depth that took snapMu before the commit
// and reads the store after it sees both copies in the store and both
// still in the index: it counted the synchronous one twice while it held
// a placeholder; now it is a record of the commit's batch like the other,
// and the epoch corrects both.
func TestDepthCountsSyncPublishOnceAcrossItsCommit(t *testing.T) {
	ctx := context.Background()
	tr, gid, _ := openInbox(t, 100)
	if err := tr.Publish(ctx, gid, attackEnv(gid, "journaled"), true); err != nil {
		t.Fatal(err)
	}
	if tr.pendingPublishes() != 1 {
		t.Fatal("the journaled publish was committed already: the test proves nothing")
	}
	for _, j := range tr.pend.segs {
		j.Close()
	}
	tr.snapMu.RLock() // a Depth between its RLock and its View
	done := make(chan error, 1)
	go func() { done <- tr.Publish(ctx, gid, attackEnv(gid, "synchronous"), true) }()
	var count, epoch uint64
	deadline := time.Now().Add(5 * time.Second)
	for count < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		_ = tr.db.View(func(tx *bolt.Tx) error {
			count, epoch = getCount(tx.Bucket(bktCount), []byte(gid)), getEpoch(tx)
			return nil
		})
	}
	tr.pmu.Lock()
	n := tr.storedLocked(gid, count, epoch)
	tr.pmu.Unlock()
	tr.snapMu.RUnlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("Depth %d across the commit, want 2 (store count %d)", n, count)
	}
}

// failCommits replaces tr's writer by one whose commits of journal work
// fail while the returned flag is set (a full disk, as the writer sees it:
// the batch is put back and tried with the next commit).
func failCommits(t *testing.T, tr *Transport) *atomic.Bool {
	t.Helper()
	var fail atomic.Bool
	tr.writer.Stop()
	tr.writer = store.NewGroupWriterExtraFirst(tr.db, func() (func(*bolt.Tx) error, func(error)) {
		apply, done := tr.journalWork()
		if apply == nil {
			return nil, nil
		}
		return func(tx *bolt.Tx) error {
			if fail.Load() {
				return fmt.Errorf("simulated: %w", syscall.ENOSPC)
			}
			return apply(tx)
		}, done
	}, journalApplyDelay)
	return &fail
}

// DeleteInbox fails (the journals cannot be committed: a full disk) after
// it stopped the inbox's numbering; its journaled messages are put back,
// their sequences past the store's. The entity is declared again (the
// store still binds it): numbering restarts from the store's committed
// sequence and hands out a sequence a journaled message holds. Once the
// disk has room, both are stored at one key: one is lost.
func TestFailedDeleteThenRedeclareReusesNoSequence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	fail := failCommits(t, tr)
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, gid, attackEnv(gid, "before-delete"), true); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := tr.DeleteInbox(ctx, gid); err == nil {
		t.Fatal("DeleteInbox succeeded with every commit failing")
	}
	fail.Store(false)
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, gid, attackEnv(gid, "after-redeclare"), true); err != nil {
		t.Fatal(err)
	}
	if err := tr.flushJournals(); err != nil {
		t.Fatal(err)
	}
	depth := tr.Depth(gid)
	seen := drainBodies(t, tr, gid)
	if seen["before-delete"] != 1 || seen["after-redeclare"] != 1 || depth != 2 {
		t.Errorf("delivered %v with depth %d, want each once and depth 2", seen, depth)
	}
}

// Commits fail for a while (the batch put back each time, the segments
// rotating only when the other is empty) under concurrent publishers,
// then succeed, then more publishes, then a kill -9 before the next
// commit: every confirmed publish is delivered exactly once after the
// restart.
func TestFailingCommitsRotationCrashDeliversEachOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	fail := failCommits(t, h.tr)
	var want []string
	var mu sync.Mutex
	round := func(tag string, n int) {
		var wg sync.WaitGroup
		for p := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n {
					b := fmt.Sprintf("%s-%d-%d", tag, p, i)
					if err := h.tr.Publish(ctx, gid, attackEnv(gid, b), true); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					want = append(want, b)
					mu.Unlock()
					if i%5 == 0 {
						h.tr.writer.CommitNow()
					}
				}
			}()
		}
		wg.Wait()
	}
	fail.Store(true)
	round("failing", 10)
	_ = h.tr.flushJournals()
	fail.Store(false)
	round("ok", 10)
	if err := h.tr.flushJournals(); err != nil {
		t.Fatal(err)
	}
	round("tail", 5)
	// drain what was delivered before the crash without acking: all come again
	h.crash()
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if d := tr.Depth(gid); d != len(want) {
		t.Errorf("depth %d after the crash, want %d", d, len(want))
	}
	seen := drainBodies(t, tr, gid)
	for _, b := range want {
		if seen[b] != 1 {
			t.Errorf("%s delivered %d times", b, seen[b])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct delivered, want %d", len(seen), len(want))
	}
}

// Close while publishers publish and a consumer acks: every Publish that
// returned nil is delivered exactly once after the reopen (acked ones
// never again), and nothing unconfirmed is doubled.
func TestCloseMidPublishLosesNothingConfirmed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	tr, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	confirmed := map[string]bool{}
	acked := map[string]bool{}
	sub, err := tr.Consume(ctx, gid, 8, func(d bridge.Delivery) {
		if d.Acker.Ack() == nil {
			mu.Lock()
			acked[string(d.Env.Body)] = true
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				b := fmt.Sprintf("p%d-%d", p, i)
				if err := tr.Publish(ctx, gid, attackEnv(gid, b), true); err != nil {
					return
				}
				mu.Lock()
				confirmed[b] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	tr2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	seen := drainBodies(t, tr2, gid)
	mu.Lock()
	defer mu.Unlock()
	for b := range confirmed {
		if !acked[b] && seen[b] != 1 {
			t.Errorf("%s confirmed, not acked, delivered %d times after the reopen", b, seen[b])
		}
		if acked[b] && seen[b] != 0 {
			t.Errorf("%s acked before Close, delivered again %d times", b, seen[b])
		}
	}
	for b, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", b, n)
		}
	}
	t.Logf("%d confirmed, %d acked, %d after reopen", len(confirmed), len(acked), len(seen))
}

// Reject (dead letter) and inline TTL expiry of a message still only in
// the pending index: each goes to the dead-letter queue once, and the
// inbox ends empty.
func TestSettleWithReasonOfPendingMessage(t *testing.T) {
	ctx := context.Background()
	tr, gid, _ := openInbox(t, 100)
	dead := make(chan bridge.DeadLetter, 16)
	dsub, err := tr.ConsumeDeadLetters(ctx, func(d bridge.DeadLetter) { dead <- d; _ = d.Acker.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	defer dsub.Cancel()
	got := make(chan bridge.Delivery, 16)
	sub, err := tr.Consume(ctx, gid, 8, func(d bridge.Delivery) { got <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	if err := tr.Publish(ctx, gid, attackEnv(gid, "reject-me"), true); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if tr.pendingPublishes() == 0 {
		t.Log("committed before the reject: weaker test")
	}
	if err := d.Acker.Reject("no"); err != nil {
		t.Fatal(err)
	}
	select {
	case dl := <-dead:
		if string(dl.Env.Body) != "reject-me" {
			t.Fatalf("dead letter %q", dl.Env.Body)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the rejected pending message never reached the dead-letter queue")
	}
	if n := tr.Depth(gid); n != 0 {
		t.Fatalf("depth %d after the reject", n)
	}
}

// With no consumer and no acks, Depth never goes down and never passes
// the publishes begun, while commits carry batches all the while.
func TestDepthMonotonicUnderCommits(t *testing.T) {
	ctx := context.Background()
	tr, gid, _ := openInbox(t, 1<<20)
	var begun atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				begun.Add(1)
				if err := tr.Publish(ctx, gid, attackEnv(gid, fmt.Sprintf("%d-%d", p, i)), true); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					tr.writer.CommitNow()
				}
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()
	last := 0
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		d, ds := tr.Depth(gid), tr.Depths()[gid]
		if d < last || ds < d && done {
			t.Fatalf("Depth went from %d to %d (Depths %d)", last, d, ds)
		}
		if b := int(begun.Load()); d > b {
			t.Fatalf("Depth %d past the %d publishes begun", d, b)
		}
		last = d
	}
	if err := tr.flushJournals(); err != nil {
		t.Fatal(err)
	}
	if d := tr.Depth(gid); d != 900 {
		t.Fatalf("depth %d, want 900", d)
	}
}

// A delivery reads the store before a synchronous publish (seq N+1, the
// journal refused it) commits, and the index after its placeholder was
// dropped and a journaled publish (N+2) was made durable: it sees N+2
// and not N+1, the cursor passes N+1, which is never delivered in this
// process (yet counted in Depth: a removal waits on it, then deletes it).
func TestDeliveryNeverPassesSyncPublishAcrossItsCommit(t *testing.T) {
	ctx := context.Background()
	tr, gid, path := openInbox(t, 100)
	segs := tr.pend.segs
	for _, j := range segs {
		j.Close()
	}
	envS := attackEnv(gid, "synchronous")
	h, hb := splitHeaders(envS.Headers())
	recS, _ := json.Marshal(record{H: h, HB: hb, B: envS.Body, At: time.Now().UnixMilli(), K: gid})
	targets, err := tr.routeSnapshot(gid)
	if err != nil {
		t.Fatal(err)
	}
	a := tr.accept(targets, gid, recS, time.Now())
	if !a.unjournaled {
		t.Fatal("the publish was journaled")
	}
	tr.pmu.Lock() // the journal writable again (a full segment cut meanwhile)
	for i := range tr.pend.segs {
		j, _, _, err := store.OpenJournal(path + pubJournalSuffix + fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		tr.pend.segs[i] = j
	}
	tr.pmu.Unlock()
	items := tr.readInboxBetween(gid, 0, 8, func() {
		done := make(chan struct{}, 2)
		go func() {
			_ = tr.makeDurable(a, targets, envS)
			tr.published(targets)
			done <- struct{}{}
		}()
		go func() {
			if err := tr.Publish(ctx, gid, attackEnv(gid, "journaled"), true); err != nil {
				t.Error(err)
			}
			done <- struct{}{}
		}()
		for range 2 {
			select {
			case <-done:
			case <-time.After(300 * time.Millisecond):
				return // held back by the read: as it should
			}
		}
	})
	var seqs []uint64
	for _, it := range items {
		seqs = append(seqs, it.seq)
	}
	if len(seqs) > 0 && seqs[0] != a.rec.targets[0].seq {
		t.Fatalf("the delivery read %v, passing the synchronous publish's sequence %d", seqs, a.rec.targets[0].seq)
	}
	seen := drainBodies(t, tr, gid)
	if seen["synchronous"] != 1 || seen["journaled"] != 1 {
		t.Fatalf("delivered %v", seen)
	}
}

// Acks whose commit failed are committed by a retry of their own once the
// store takes writes again, not only when some other write comes: the
// put-back batch asks for its commit (an ack signals only when it is the
// first one pending, and the failed ones still were).
func TestFailedAckCommitIsRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	defer h.tr.Close()
	fail := failCommits(t, h.tr)
	h.publish("one")
	if err := h.tr.flushJournals(); err != nil {
		t.Fatal(err)
	}
	d := h.next()
	fail.Store(true)
	if err := d.Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(journalApplyDelay + journalApplyDelay/2) // its commit came and failed
	if h.tr.pendingCount(gid) == 0 {
		t.Fatal("the ack was committed while commits fail: the test would prove nothing")
	}
	fail.Store(false) // the store takes writes again; nothing else will write
	deadline := time.Now().Add(3 * journalApplyDelay)
	for h.tr.pendingCount(gid) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the ack is still not committed %v after the store recovered", 3*journalApplyDelay)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
