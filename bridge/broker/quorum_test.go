package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

func openType(t testing.TB, qtype string) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokerURL(t), Heartbeat: 2 * time.Second, QueueType: qtype})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// tagged is one delivery as a receiver saw it.
type tagged struct {
	who  int
	body string
	at   time.Time
}

// record is a handler that acks at once and notes who got what when.
func record(who int, mu *sync.Mutex, got *[]tagged) func(bridge.Delivery) {
	return func(d bridge.Delivery) {
		mu.Lock()
		*got = append(*got, tagged{who, string(d.Env.Body), time.Now()})
		mu.Unlock()
		_ = d.Acker.Ack()
	}
}

// TestOneConsumerPerInbox: two transports consuming one inbox never both
// receive at once, on either queue type. Classic refuses the second
// consumer; quorum (whose exclusive flag is ignored) queues it as the
// single active consumer's standby: it receives nothing until the first
// cancels, then everything after, and every message arrives exactly once
// across the two. Fails without x-single-active-consumer: the two get
// round-robin deliveries.
func TestOneConsumerPerInbox(t *testing.T) {
	for _, qtype := range []string{broker.QueueTypeClassic, broker.QueueTypeQuorum} {
		t.Run(qtype, func(t *testing.T) {
			a, b := openType(t, qtype), openType(t, qtype)
			defer a.Close()
			defer b.Close()
			ctx := context.Background()
			gid := inbox(t, a, 0)
			var mu sync.Mutex
			var got []tagged
			first, err := a.Consume(ctx, gid, 8, record(1, &mu, &got))
			if err != nil {
				t.Fatal(err)
			}
			second, err := b.Consume(ctx, gid, 8, record(2, &mu, &got))
			if qtype == broker.QueueTypeClassic {
				if !errors.Is(err, bridge.ErrConsumerExists) {
					t.Fatalf("second consumer of a classic inbox: %v, want ErrConsumerExists", err)
				}
				first.Cancel()
				return
			}
			if err != nil {
				t.Fatalf("second consumer of a quorum inbox: %v", err)
			}
			defer second.Cancel()
			const n = 200
			var cancelled time.Time
			for i := range n {
				env := testEnv(gid)
				env.Body = []byte(fmt.Sprint(i))
				if err := a.Publish(ctx, gid, env, true); err != nil {
					t.Fatal(err)
				}
				if i == n/2 {
					cancelled = time.Now() // the first is active until its Cancel begins (which waits for the queue to let go of it)
					first.Cancel()
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				k := len(got)
				mu.Unlock()
				if k >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			seen := map[string]int{}
			byWho := map[int]int{}
			for _, g := range got {
				seen[g.body]++
				byWho[g.who]++
				if g.who == 2 && g.at.Before(cancelled) {
					t.Errorf("the standby consumer received %s while the first was active", g.body)
				}
			}
			for i := range n {
				if c := seen[fmt.Sprint(i)]; c != 1 {
					t.Errorf("message %d received %d times", i, c)
				}
			}
			if byWho[1] == 0 || byWho[2] == 0 {
				t.Errorf("deliveries per consumer %v: the standby never took over, or the first never received", byWho)
			}
		})
	}
}

// queueIs checks q exists with exactly args (a declare with other
// arguments is PRECONDITION_FAILED), on a raw connection.
func queueIs(t *testing.T, conn *amqp.Connection, q string, args amqp.Table) error {
	t.Helper()
	_, err := declareRaw(t, conn, q, args)
	return err
}

// TestQueueArgumentsPerType: the inbox, control and dead-letter queues of
// each type carry the arguments README "Queue types" lists, as RabbitMQ
// reads them back: a redeclare with those arguments is accepted, one
// with the other type's is refused.
func TestQueueArgumentsPerType(t *testing.T) {
	conn := rawConn(t)
	ctx := context.Background()
	host := "args-" + uuid.NewString()[:8]
	q := openType(t, broker.QueueTypeQuorum)
	defer q.Close()
	gid := uuid.NewString()
	spec := bridge.InboxSpec{MaxLength: 10, MessageTTL: time.Hour, Expires: 24 * time.Hour}
	if err := q.DeclareInbox(ctx, gid, spec); err != nil {
		t.Fatal(err)
	}
	defer q.DeleteInbox(ctx, gid)
	sub, err := q.ConsumeControl(ctx, host, func(d bridge.Delivery) { _ = d.Acker.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	sub.Cancel()
	defer deleteRaw(t, conn, broker.ControlQueueOf(host, broker.QueueTypeQuorum))
	quorum := amqp.Table{"x-queue-type": "quorum", "x-single-active-consumer": true, "x-overflow": "reject-publish",
		"x-dead-letter-exchange": "bridge.dlx.v3", "x-dead-letter-strategy": "at-least-once", "x-delivery-limit": int64(broker.DeliveryLimit)}
	inboxArgs := amqp.Table{"x-max-length": int64(9), "x-message-ttl": int64(3600000), "x-expires": int64(86400000)}
	for k, v := range quorum {
		inboxArgs[k] = v
	}
	if err := queueIs(t, conn, "agent."+gid+".inbox.v3", inboxArgs); err != nil {
		t.Errorf("quorum inbox: %v", err)
	}
	if err := queueIs(t, conn, "control."+host+".v3", quorum); err != nil {
		t.Errorf("quorum control queue: %v", err)
	}
	if err := queueIs(t, conn, "bridge.dlq.v3", amqp.Table{"x-queue-type": "quorum", "x-max-length": int64(10000), "x-overflow": "drop-head"}); err != nil {
		t.Errorf("quorum dead-letter queue: %v", err)
	}
	if err := queueIs(t, conn, "agent."+gid+".inbox.v3", amqp.Table{"x-queue-type": "classic"}); err == nil {
		t.Error("the .v3 inbox took a classic redeclare")
	}
}

func deleteRaw(t *testing.T, conn *amqp.Connection, q string) {
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	defer ch.Close()
	_, _ = ch.QueueDelete(q, false, false, false)
}

// queueGone reports whether q does not exist.
func queueGone(t *testing.T, conn *amqp.Connection, q string) bool {
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
