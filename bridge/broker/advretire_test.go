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
