package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// TestRetireWithDeliveriesInFlight: a drain whose last messages are
// pushed to the consumer (unacked at the broker, not yet handed to the
// handler) when the retire check runs: the legacy queue counts 0 ready
// then, and its deletion must not take them with it. Both directions; a
// slow handler makes the check run while the prefetch window is full.
// Fails before stopLegacy: quorum->classic lost 5 to 8 of 40 (the
// prefetch window) in 5 of 5 rounds; the delete came before the quorum
// queue had the closed channel's deliveries back.
func TestRetireWithDeliveriesInFlight(t *testing.T) {
	for _, from := range []string{broker.QueueTypeQuorum, broker.QueueTypeClassic} {
		to := broker.QueueTypeQuorum
		if from == to {
			to = broker.QueueTypeClassic
		}
		for round := range 5 {
			gid := uuid.NewString()
			old := openType(t, from)
			if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
				t.Fatal(err)
			}
			const n = 20
			hold(t, old, gid, n)
			old.Close()
			tr := openType(t, to)
			if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
				t.Fatal(err)
			}
			r := newReceiver(45 * time.Millisecond)
			sub, err := tr.Consume(context.Background(), gid, 8, r.handle)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(2*n*45*time.Millisecond + 5*time.Second)
			for r.count() < 2*n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			got := r.count()
			sub.Cancel()
			_ = tr.DeleteInbox(context.Background(), gid)
			tr.Close()
			t.Logf("%s->%s round %d: sent/confirmed %d, received %d distinct, %d copies dropped", from, to, round, 2*n, got, r.dups)
			if got != 2*n {
				t.Errorf("%s->%s round %d: %d of %d received: the legacy queue was deleted with messages in flight", from, to, round, got, 2*n)
			}
		}
	}
}

// TestCloseInboxMidDrain: an entity removed while its legacy inbox is
// being drained (the core's closeAndDrain: CloseInbox, the consumer
// cancelled, CloseInbox again). Every message is received or counted as
// left for the removal to report: none is both, none neither.
func TestCloseInboxMidDrain(t *testing.T) {
	for _, types := range [][2]string{{broker.QueueTypeClassic, broker.QueueTypeQuorum}, {broker.QueueTypeQuorum, broker.QueueTypeClassic}, {broker.QueueTypeQuorum, broker.QueueTypeQuorum}} {
		t.Run(types[0]+"->"+types[1], func(t *testing.T) { closeMidDrain(t, types[0], types[1]) })
	}
}

func closeMidDrain(t *testing.T, from, to string) {
	gid := uuid.NewString()
	old := openType(t, from)
	if err := old.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	hold(t, old, gid, n)
	old.Close()
	tr := openType(t, to)
	defer tr.Close()
	defer tr.DeleteInbox(context.Background(), gid)
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(10 * time.Millisecond)
	sub, err := tr.Consume(context.Background(), gid, 8, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, n/2)
	if _, err := tr.CloseInbox(context.Background(), gid); err != nil {
		t.Fatal(err)
	}
	sub.Cancel()
	left, err := tr.CloseInbox(context.Background(), gid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent/confirmed %d, received %d distinct, left for the removal %d, %d copies dropped", 2*n, r.count(), left, r.dups)
	if r.count()+left != 2*n {
		t.Errorf("received %d + left %d != %d sent", r.count(), left, 2*n)
	}
}

// TestCloseQuorumInboxAllInFlight: a quorum inbox whose every message is
// pushed to its consumer (none ready) when the entity is removed: counted
// after the consumer is cancelled, what it held must be back in the count
// (a quorum queue takes a closed channel's deliveries back
// asynchronously), or the removal deletes them unreported.
func TestCloseQuorumInboxAllInFlight(t *testing.T) {
	for round := range 5 {
		gid := uuid.NewString()
		tr := openType(t, broker.QueueTypeQuorum)
		if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
			t.Fatal(err)
		}
		hold(t, tr, gid, 4) // 8 messages: the whole prefetch window
		r := newReceiver(300 * time.Millisecond)
		sub, err := tr.Consume(context.Background(), gid, 8, r.handle)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // all pushed, the first in the handler
		sub.Cancel()
		left, err := tr.CloseInbox(context.Background(), gid)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: sent/confirmed 8, received %d, left for the removal %d", round, r.count(), left)
		if r.count()+left != 8 {
			t.Errorf("round %d: received %d + left %d != 8", round, r.count(), left)
		}
		_ = tr.DeleteInbox(context.Background(), gid)
		tr.Close()
	}
}
