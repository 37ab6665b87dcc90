package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// rawConn is a plain AMQP connection to the test broker, closed with the
// test.
func rawConn(t *testing.T) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// declareRaw declares q with args on a channel of its own (a 406 closes
// it) and returns the broker's answer.
func declareRaw(t *testing.T, conn *amqp.Connection, q string, args amqp.Table) (amqp.Queue, error) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	return ch.QueueDeclare(q, true, false, false, false, args)
}

func olderInboxArgs(maxLen int64, overflow string) amqp.Table {
	return amqp.Table{"x-dead-letter-exchange": broker.ExchangeDLX, "x-max-length": maxLen, "x-overflow": overflow}
}

// TestRejectPublishMigratesOlderInbox: where inboxes are reject-publish
// (LavinMQ; forced here), an inbox an older gateway declared
// reject-publish-dlx — whose redeclare would be PRECONDITION_FAILED — is
// migrated when it is empty; one that holds messages is kept as it is
// (nothing lost) and the gateway starts; one that differs in more than its
// overflow is still a startup error naming the queue.
func TestRejectPublishMigratesOlderInbox(t *testing.T) {
	conn := rawConn(t)
	tr := openWith(t, broker.OverflowRejectPublish)
	defer tr.Close()
	ctx := context.Background()
	spec := bridge.InboxSpec{MaxLength: 3}

	empty, full, other := uuid.NewString(), uuid.NewString(), uuid.NewString()
	for _, gid := range []string{empty, full, other} {
		if _, err := declareRaw(t, conn, bridge.InboxQueueName(gid), olderInboxArgs(3, broker.OverflowRejectPublishDLX)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, "", bridge.InboxQueueName(full), false, false, amqp.Publishing{Body: []byte("waiting")}); err != nil {
		t.Fatal(err)
	}
	ch.Close()

	if err := tr.DeclareInbox(ctx, empty, spec); err != nil {
		t.Fatalf("empty older inbox: %v", err)
	}
	if _, err := declareRaw(t, conn, bridge.InboxQueueName(empty), olderInboxArgs(3, broker.OverflowRejectPublish)); err != nil {
		t.Errorf("the empty inbox was not migrated to reject-publish: %v", err)
	}

	if err := tr.DeclareInbox(ctx, full, spec); err != nil {
		t.Fatalf("older inbox holding a message: %v", err)
	}
	q, err := declareRaw(t, conn, bridge.InboxQueueName(full), olderInboxArgs(3, broker.OverflowRejectPublishDLX))
	if err != nil || q.Messages != 1 {
		t.Errorf("the inbox holding a message: %+v, %v; want it kept as it was, its message in it", q, err)
	}

	err = tr.DeclareInbox(ctx, other, bridge.InboxSpec{MaxLength: 5})
	if err == nil || !strings.Contains(err.Error(), bridge.InboxQueueName(other)) || !strings.Contains(err.Error(), "other arguments") {
		t.Errorf("an inbox with another cap: %v, want the startup error naming it", err)
	}
}

// TestRejectPublishBroadcastCopyDeadLettered: under reject-publish a
// broadcast whose copy a full inbox refused still succeeds (the other
// inboxes have it) and the refused copy is in the dead-letter queue —
// never dropped in silence. The nack does not say which inbox refused it.
func TestRejectPublishBroadcastCopyDeadLettered(t *testing.T) {
	tr := openWith(t, broker.OverflowRejectPublish)
	defer tr.Close()
	ctx := context.Background()
	group := "g" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	full, roomy := uuid.NewString(), uuid.NewString()
	for gid, max := range map[string]int{full: 1, roomy: 10} {
		if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{Groups: []string{group}, MaxLength: max}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	}
	envelope := func(kind bridge.Kind, to string) *bridge.Envelope {
		now := time.UnixMilli(time.Now().UnixMilli())
		return &bridge.Envelope{V: bridge.Version, Kind: kind, MsgID: uuid.NewString(), From: uuid.NewString(), To: to, Host: "h",
			TS: now, ExpiresAt: now.Add(time.Minute), Sig: []byte("s"), Body: []byte("b")}
	}
	if err := tr.Publish(ctx, full, envelope(bridge.KindReply, full), true); err != nil {
		t.Fatal(err)
	}
	dead := make(chan bridge.DeadLetter, 64)
	sub, err := tr.ConsumeDeadLetters(ctx, func(dl bridge.DeadLetter) { _ = dl.Acker.Ack(); dead <- dl })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	b := envelope(bridge.KindBroadcast, bridge.BroadcastKey(group))
	if err := tr.Publish(ctx, b.To, b, false); err != nil {
		t.Fatalf("broadcast with one inbox full: %v", err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case dl := <-dead:
			if dl.MsgID != b.MsgID {
				continue // another test's
			}
			if dl.Reason != bridge.ReasonMaxLen || !strings.Contains(dl.Queue, b.To) {
				t.Errorf("dead letter %+v, want maxlen from an inbox bound to %s", dl, b.To)
			}
			return
		case <-timeout:
			t.Fatal("the broadcast copy the full inbox refused never reached the dead-letter queue")
		}
	}
}
