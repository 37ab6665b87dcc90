package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// trafficSenders publish, from another host's transport, one confirmed
// message at a time per sender (so each sender's order is defined) until
// stop closes; confirmed counts what the broker confirmed.
type trafficSenders struct {
	ids       []string
	confirmed []atomic.Int64
	sent      atomic.Int64
	wg        sync.WaitGroup
	stop      chan struct{}
}

func startTraffic(t *testing.T, tr *broker.Transport, gid string, senders int) *trafficSenders {
	s := &trafficSenders{confirmed: make([]atomic.Int64, senders), stop: make(chan struct{})}
	for range senders {
		s.ids = append(s.ids, uuid.NewString())
	}
	for i := range senders {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-s.stop:
					return
				default:
				}
				env := testEnv(gid)
				env.From, env.Body = s.ids[i], []byte(fmt.Sprint(n))
				s.sent.Add(1)
				if err := tr.Publish(context.Background(), gid, env, true); err != nil {
					t.Errorf("sender %d: message %d: %v", i, n, err)
					return
				}
				s.confirmed[i].Add(1)
			}
		}()
	}
	return s
}

func (s *trafficSenders) halt() int {
	close(s.stop)
	s.wg.Wait()
	total := 0
	for i := range s.confirmed {
		total += int(s.confirmed[i].Load())
	}
	return total
}

// checkPrefix: each sender's bodies are 0..k-1 in order, and every
// confirmed one arrived.
func (s *trafficSenders) check(t *testing.T, r *receiver) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, id := range s.ids {
		got := r.order[id]
		if want := int(s.confirmed[i].Load()); len(got) < want {
			t.Errorf("sender %d: %d received, %d confirmed", i, len(got), want)
		}
		for j, b := range got {
			if b != fmt.Sprint(j) {
				t.Errorf("sender %d: position %d holds message %s: out of order", i, j, b)
				break
			}
		}
	}
}

// TestMigrationUnderTraffic: a classic inbox holds a backlog when its
// gateway comes back as quorum, while senders on another (classic) host
// keep sending through the bind/unbind overlap and the drain. Every
// confirmed message arrives, in order per sender; a second copy (the
// overlap) carries the same msgId, so the receiver's de-duplication drops
// it.
func TestMigrationUnderTraffic(t *testing.T) {
	conn := rawConn(t)
	gid := uuid.NewString()
	old := openType(t, broker.QueueTypeClassic)
	if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	held := hold(t, old, gid, 200)
	old.Close()

	other := openType(t, broker.QueueTypeClassic) // another host's gateway, not upgraded
	defer other.Close()
	traffic := startTraffic(t, other, gid, 3)
	time.Sleep(200 * time.Millisecond)

	r := newReceiver(time.Millisecond)
	tr := openType(t, broker.QueueTypeQuorum)
	defer tr.Close()
	defer tr.DeleteInbox(context.Background(), gid)
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	sub, err := tr.Consume(context.Background(), gid, 16, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	deadline := time.Now().Add(15 * time.Second)
	for !queueGone(t, conn, broker.InboxQueue(gid, broker.QueueTypeClassic)) {
		if time.Now().After(deadline) {
			t.Fatal("the legacy inbox is still there under traffic")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // traffic after the migration, into .v3 only
	confirmed := traffic.halt()
	r.waitFor(t, 400+confirmed)
	time.Sleep(200 * time.Millisecond) // a late duplicate would show here
	r.checkOrdered(t, held, 200)
	traffic.check(t, r)
	t.Logf("sent %d, confirmed %d (+400 held), received %d distinct, %d copies dropped by msgId",
		traffic.sent.Load(), confirmed, r.count(), r.dups)
}

// TestFlipBackMidMigration: a gateway restarted as quorum starts draining
// its classic backlog and goes away mid-drain; meanwhile another host's
// sender goes on (its messages land in .v3: .v2 was unbound); the gateway
// comes back as classic again (the flag flipped back). Every message
// arrives once, in order per sender: the rest of the .v2 backlog is older
// than what .v3 holds.
func TestFlipBackMidMigration(t *testing.T) {
	gid := uuid.NewString()
	old := openType(t, broker.QueueTypeClassic)
	if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	const n = 150
	senders := hold(t, old, gid, n)

	r := newReceiver(3 * time.Millisecond)
	q := openType(t, broker.QueueTypeQuorum)
	if err := q.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Consume(context.Background(), gid, 4, r.handle); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, n/2)
	q.Close() // mid-drain: the rest of the backlog stays in .v2
	if r.count() >= 2*n {
		t.Fatal("the drain finished first: the test proves nothing")
	}
	for i := n; i < 2*n; i++ { // the other host sends on: into .v3
		for _, s := range senders {
			env := testEnv(gid)
			env.From, env.Body = s, []byte(fmt.Sprint(i))
			if err := old.Publish(context.Background(), gid, env, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	old.Close()

	back := openType(t, broker.QueueTypeClassic)
	defer back.Close()
	defer back.DeleteInbox(context.Background(), gid)
	if err := back.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	sub, err := back.Consume(context.Background(), gid, 4, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	r.waitFor(t, 4*n)
	time.Sleep(200 * time.Millisecond) // a late copy would show here
	if r.count() != 4*n {
		t.Errorf("received %d distinct, sent %d", r.count(), 4*n)
	}
	t.Logf("sent/confirmed %d, received %d distinct, %d copies dropped by msgId, %d of %d senders out of order (known)",
		4*n, r.count(), r.dups, outOfOrder(r, senders), len(senders))
}

// outOfOrder counts the senders whose bodies did not arrive as 0, 1, ….
func outOfOrder(r *receiver, senders []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for _, s := range senders {
		for i, b := range r.order[s] {
			if b != fmt.Sprint(i) {
				bad++
				break
			}
		}
	}
	return bad
}
