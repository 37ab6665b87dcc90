package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// receiver is a consumer that de-duplicates by msgId as the core does,
// acking each delivery after hold, and keeps per sender the order bodies
// arrived in.
type receiver struct {
	mu    sync.Mutex
	seen  map[string]bool
	order map[string][]string // sender -> bodies, first copies only
	dups  int
	hold  time.Duration
}

func newReceiver(hold time.Duration) *receiver {
	return &receiver{seen: map[string]bool{}, order: map[string][]string{}, hold: hold}
}

func (r *receiver) handle(d bridge.Delivery) {
	time.Sleep(r.hold)
	r.mu.Lock()
	if r.seen[d.Env.MsgID] {
		r.dups++
	} else {
		r.seen[d.Env.MsgID] = true
		r.order[d.Env.From] = append(r.order[d.Env.From], string(d.Env.Body))
	}
	r.mu.Unlock()
	_ = d.Acker.Ack()
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *receiver) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d", r.count(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOrdered: each sender's n messages arrived once each, in order.
func (r *receiver) checkOrdered(t *testing.T, senders []string, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range senders {
		got := r.order[s]
		if len(got) != n {
			t.Errorf("sender %s: %d messages, want %d", s[:8], len(got), n)
			continue
		}
		for i, b := range got {
			if b != fmt.Sprint(i) {
				t.Errorf("sender %s: message %d is %s: out of order", s[:8], i, b)
				break
			}
		}
	}
}

// hold publishes n messages from each of two senders, interleaved, into
// gid's inbox on tr.
func hold(t *testing.T, tr *broker.Transport, gid string, n int) []string {
	t.Helper()
	senders := []string{uuid.NewString(), uuid.NewString()}
	for i := range n {
		for _, s := range senders {
			env := testEnv(gid)
			env.From, env.Body = s, []byte(fmt.Sprint(i))
			if err := tr.Publish(context.Background(), gid, env, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	return senders
}

// TestInboxMigratesBetweenTypes: an inbox holding messages under one
// type is drained, in order, by a gateway of the other type, the legacy
// queue deleted once empty, and new messages reach the new queue; then
// back again. Fails before migrate.go: the quorum transport consumed only
// the (empty) .v3 inbox and the held messages stayed in .v2.
func TestInboxMigratesBetweenTypes(t *testing.T) {
	conn := rawConn(t)
	gid := uuid.NewString()
	from, to := broker.QueueTypeClassic, broker.QueueTypeQuorum
	for range 2 {
		old := openType(t, from)
		if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
			t.Fatal(err)
		}
		senders := hold(t, old, gid, 50)
		old.Close()

		tr := openType(t, to)
		if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
			t.Fatal(err)
		}
		r := newReceiver(0)
		sub, err := tr.Consume(context.Background(), gid, 8, r.handle)
		if err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, 100)
		deadline := time.Now().Add(10 * time.Second)
		for !queueGone(t, conn, broker.InboxQueue(gid, from)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s -> %s: the legacy inbox is still there", from, to)
			}
			time.Sleep(50 * time.Millisecond)
		}
		after := testEnv(gid)
		after.From, after.Body = senders[0], []byte("50")
		if err := tr.Publish(context.Background(), gid, after, true); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, 101)
		sub.Cancel()
		r.order[senders[0]] = r.order[senders[0]][:50]
		r.checkOrdered(t, senders, 50)
		if r.dups != 0 {
			t.Errorf("%d duplicates with no crash", r.dups)
		}
		tr.Close()
		from, to = to, from
	}
	tr := openType(t, broker.QueueTypeClassic)
	defer tr.Close()
	_ = tr.DeleteInbox(context.Background(), gid)
}

// TestMigrationResumesAfterCrash: the connection of the transport
// draining a legacy inbox is cut mid-drain (it re-attaches to the legacy
// inbox), then the transport goes away mid-drain (its connection closes
// with deliveries unacked); the next start drains the rest. Every message arrives, in order per
// sender; a copy received twice has the same msgId (the dedup drops it).
func TestMigrationResumesAfterCrash(t *testing.T) {
	conn := rawConn(t)
	gid := uuid.NewString()
	old := openType(t, broker.QueueTypeClassic)
	if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	const n = 150
	senders := hold(t, old, gid, n)
	old.Close()

	r := newReceiver(2 * time.Millisecond)
	p, url := brokertest.NewProxy(t, brokerURL(t))
	tr, err := broker.Open(context.Background(), broker.Options{URL: url, QueueType: broker.QueueTypeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Consume(context.Background(), gid, 16, r.handle); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, n/3)
	p.Cut() // the connection dies mid-drain: the same transport re-attaches to the legacy inbox
	r.waitFor(t, n)
	tr.Close() // and the process goes: what was delivered and not acked goes back to .v2
	if r.count() >= 2*n {
		t.Fatal("the drain finished before the crash: the test proves nothing")
	}
	if queueGone(t, conn, broker.InboxQueue(gid, broker.QueueTypeClassic)) {
		t.Fatal("the legacy inbox is gone before it was drained")
	}

	tr = openType(t, broker.QueueTypeQuorum)
	defer tr.Close()
	defer tr.DeleteInbox(context.Background(), gid)
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	sub, err := tr.Consume(context.Background(), gid, 16, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	r.waitFor(t, 2*n)
	r.checkOrdered(t, senders, n)
	deadline := time.Now().Add(10 * time.Second)
	for !queueGone(t, conn, broker.InboxQueue(gid, broker.QueueTypeClassic)) {
		if time.Now().After(deadline) {
			t.Fatal("the legacy inbox is still there after the resumed drain")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("duplicates dropped by msgId: %d", r.dups)
}
