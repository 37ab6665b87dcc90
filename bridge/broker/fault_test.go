package broker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

func rmqctl(t testing.TB, args ...string) { brokertest.Ctl(t, args...) }

// TestRecoversAfterStopApp: publishing and consuming resume after the
// broker application stops and starts again.
func TestRecoversAfterStopApp(t *testing.T) {
	tr := open(t)
	defer tr.Close()
	rmqctl(t, "status")
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	sub, err := tr.Consume(ctx, gid, 64, func(d bridge.Delivery) { got.Add(1); _ = d.Acker.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	send := func() error {
		now := time.Now()
		env := &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return tr.Publish(sctx, gid, env, true)
	}
	for i := 0; i < 10; i++ {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	rmqctl(t, "stop_app")
	time.Sleep(500 * time.Millisecond)
	rmqctl(t, "start_app")
	start := time.Now()
	for i := 0; i < 10; i++ {
		if err := send(); err != nil {
			t.Fatalf("after start_app: %v", err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for got.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("recovered in %v; consumed %d", time.Since(start), got.Load())
	if got.Load() < 20 {
		t.Fatalf("consumed %d of 20 after recovery", got.Load())
	}
}

// TestPublishChannelException: the broker closes the publish channel (here:
// bridge.msg deleted under a live connection, in a vhost of the test's own)
// — a publish fails fast with the broker's reason instead of spinning until
// its deadline, the channel is reopened, and once the exchange is back
// publishing works again on the same connection.
func TestPublishChannelException(t *testing.T) {
	url := brokerURL(t)
	vhost := "hbtest-" + uuid.NewString()[:8]
	rmqctl(t, "add_vhost", vhost)
	t.Cleanup(func() { rmqctl(t, "delete_vhost", vhost) })
	rmqctl(t, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
	vurl := strings.TrimSuffix(url, "/") + "/" + vhost
	ctx := context.Background()
	tr, err := broker.Open(ctx, broker.Options{URL: vurl})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	env := func() *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
	}
	raw, err := amqp.Dial(vurl)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ch, err := raw.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(broker.ExchangeMsg, false, false); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = tr.Publish(pctx, gid, env(), true)
	took := time.Since(start)
	t.Logf("publish with bridge.msg gone: %v after %v", err, took.Round(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "NOT_FOUND") || took > 5*time.Second {
		t.Fatalf("want a fast NOT_FOUND error, got %v after %v", err, took)
	}
	if err := ch.ExchangeDeclare(broker.ExchangeMsg, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(bridge.InboxQueueName(gid), gid, broker.ExchangeMsg, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(pctx, gid, env(), true); err != nil {
		t.Fatalf("after the exchange is back: %v", err)
	}
}

// TestPublishWhileDownFailsWithinBound: with the broker application
// stopped, a publish whose caller would wait 30 s fails after DownWait with
// ErrUnavailable and a reason naming the broker; once the broker is back,
// publishing works again on the reconnected transport.
func TestPublishWhileDownFailsWithinBound(t *testing.T) {
	url := brokerURL(t)
	ctx := context.Background()
	tr, err := broker.Open(ctx, broker.Options{URL: url, Heartbeat: 2 * time.Second, DownWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	send := func() (time.Duration, error) {
		now := time.Now()
		env := &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		err := tr.Publish(sctx, gid, env, true)
		return time.Since(start), err
	}
	if _, err := send(); err != nil {
		t.Fatal(err)
	}
	rmqctl(t, "stop_app")
	restarted := false
	defer func() {
		if !restarted {
			rmqctl(t, "start_app")
		}
	}()
	took, err := send()
	if !errors.Is(err, bridge.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("publish with the broker down: %v after %v, want ErrUnavailable saying the broker is unreachable", err, took)
	}
	if took > 5*time.Second {
		t.Fatalf("publish with the broker down failed after %v, want about DownWait (1s)", took)
	}
	rmqctl(t, "start_app")
	restarted = true
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := send()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish after start_app: %v", err)
		}
	}
	t.Logf("failed after %v while down; publishing again after start_app", took)
}
