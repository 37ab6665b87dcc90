package broker_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

// TestMain checks that every connection, channel and consumer goroutine of
// the broker transport ends with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func brokerURL(t testing.TB) string { return brokertest.URL(t) }

func open(t testing.TB) *broker.Transport { return openWith(t, "") }

// openWith opens a transport whose inboxes overflow as overflow says ("":
// as the broker's product chooses).
func openWith(t testing.TB, overflow string) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokerURL(t), Heartbeat: 2 * time.Second, Overflow: overflow})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestConformance(t *testing.T) {
	brokerURL(t)
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport { return open(t) },
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			old.Close()
			return open(t)
		},
		Peer:    func(t *testing.T, _ bridge.Transport) bridge.Transport { return open(t) },
		Timeout: 10 * time.Second,
		Grace:   400 * time.Millisecond,
	})
}

// TestConformanceRejectPublish: the whole suite with the inboxes declared
// x-overflow reject-publish, as on LavinMQ (whose reject-publish-dlx is
// drop-head), forced on RabbitMQ, which implements reject-publish: a
// publish into a full inbox is refused, and the message still reaches the
// dead-letter queue (reason maxlen, its inbox, the same envelope), written
// there by the transport since the broker does not (MaxLength).
func TestConformanceRejectPublish(t *testing.T) {
	brokerURL(t)
	open := func(t *testing.T) bridge.Transport {
		tr := openWith(t, broker.OverflowRejectPublish)
		if s := tr.Server(); s.Overflow != broker.OverflowRejectPublish || s.Product != "RabbitMQ" {
			t.Fatalf("server %+v", s)
		}
		return tr
	}
	transporttest.Run(t, transporttest.Factory{
		New:     open,
		Reopen:  func(t *testing.T, old bridge.Transport) bridge.Transport { old.Close(); return open(t) },
		Peer:    func(t *testing.T, _ bridge.Transport) bridge.Transport { return open(t) },
		Timeout: 10 * time.Second,
		Grace:   400 * time.Millisecond,
	})
}

// openQuorum opens a transport whose inboxes, control and dead-letter
// queues are quorum queues (a single RabbitMQ node has them too).
func openQuorum(t testing.TB) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokerURL(t), Heartbeat: 2 * time.Second, QueueType: broker.QueueTypeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	if tr.QueueType() != broker.QueueTypeQuorum || tr.Server().Overflow != broker.OverflowRejectPublish {
		t.Fatalf("queue type %s, server %+v", tr.QueueType(), tr.Server())
	}
	return tr
}

// TestConformanceQuorum: every transport promise on quorum queues — a
// second consumer waits (single active consumer) instead of being
// refused, a full inbox refuses the publish (reject-publish) and the
// transport dead-letters the message to bridge.dlx.v3 itself, and dead
// letters name the .v3 queues.
func TestConformanceQuorum(t *testing.T) {
	brokerURL(t)
	open := func(t *testing.T) bridge.Transport { return openQuorum(t) }
	transporttest.Run(t, transporttest.Factory{
		New:          open,
		Reopen:       func(t *testing.T, old bridge.Transport) bridge.Transport { old.Close(); return open(t) },
		Peer:         func(t *testing.T, _ bridge.Transport) bridge.Transport { return open(t) },
		Timeout:      10 * time.Second,
		Grace:        400 * time.Millisecond,
		InboxQueue:   func(gid string) string { return broker.InboxQueue(gid, broker.QueueTypeQuorum) },
		ControlQueue: func(host string) string { return broker.ControlQueueOf(host, broker.QueueTypeQuorum) },
		SingleActive: true,
		// a full quorum inbox refuses until it drained below a low-water
		// mark (README "Queue types")
		SoftMaxLength: true,
	})
}
