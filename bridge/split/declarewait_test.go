package split_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/split"
)

// slowDeclare is a broker link whose inbox declares wait for release once
// slow is set: the broker taking its time over the inboxes of this host
// made during an outage.
type slowDeclare struct {
	*memnet.Transport
	slow    atomic.Bool
	entered chan struct{} // closed when a slow declare began
	release chan struct{}
	once    sync.Once
}

func (s *slowDeclare) DeclareInbox(ctx context.Context, gid string, spec bridge.InboxSpec) error {
	if s.slow.Load() {
		s.once.Do(func() { close(s.entered) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Transport.DeclareInbox(ctx, gid, spec)
}

// TestOutboxWaitsForInboxesDeclaredDuringOutage: an inbox made during a
// broker outage asks another host a question; the question waits in the
// outbox, and the other host answers it into that inbox the moment it
// arrives. The outbox goes only once the inbox is on the broker, so the
// answer is routed. Before, the pump published the question as soon as the
// link was back, beside the declare, and the answer (a NO_WAITER, in the
// sim: seed 6152566022319476111, faults abandon,stall,cut,stop,remove) was
// unroutable: the asker never heard.
func TestOutboxWaitsForInboxesDeclaredDuringOutage(t *testing.T) {
	outboxAnswerRace(t, 0)
}

// outboxAnswerRace is the question, asked from an inbox made during an
// outage of at least outage, and its answer (see the tests).
func outboxAnswerRace(t *testing.T, outage time.Duration) {
	n := network(t)
	link := &slowDeclare{Transport: n.Connect(), entered: make(chan struct{}), release: make(chan struct{})}
	b := n.Connect()
	t.Cleanup(func() { _ = b.Close() })
	a := open(t, filepath.Join(t.TempDir(), "local.db"), link, split.Options{Host: "ha", Bound: time.Minute, RetryEvery: 10 * time.Millisecond})
	ctx := context.Background()
	other := uuid.NewString() // the other host's inbox: it answers into the inbox its message names
	if err := b.DeclareInbox(ctx, other, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	sub, err := b.Consume(ctx, other, 4, func(d bridge.Delivery) {
		_ = d.Acker.Ack()
		to := string(d.Env.Body)
		answered <- b.Publish(ctx, to, env("hb", to, "answer", time.Minute), true)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)

	link.LinkDown()
	asker := uuid.NewString()
	if err := a.DeclareInbox(ctx, asker, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, other, env("ha", other, asker, time.Minute), true); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("the question with the link down: %v, want ErrSpooled", err)
	}
	time.Sleep(outage)
	link.slow.Store(true)
	link.LinkUp()
	select {
	case <-link.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the inbox made during the outage was not declared on the broker")
	}
	time.Sleep(200 * time.Millisecond) // room for a pump that does not wait
	close(link.release)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the answer into the inbox made during the outage: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the question never reached the other host")
	}
}

// TestOutboxWaitsForDeclaresAfterALongOutage: as
// TestOutboxWaitsForInboxesDeclaredDuringOutage, with an outage longer
// than the pump's wait for the declares. The wait counts from the link's
// return, not from the pump's first look during the outage; it did, so
// after any outage past 10 s the outbox went out beside the declare again.
func TestOutboxWaitsForDeclaresAfterALongOutage(t *testing.T) {
	outboxAnswerRace(t, 11*time.Second)
}
