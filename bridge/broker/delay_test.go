package broker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// lockedBuffer is a log sink the transport's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDelayOffOnRabbitMQ: the RabbitMQ here has no delayed-message plugin
// (Debian's 3.10 ships none). The probe finds that out on a connection of
// its own — the declare of an unknown exchange type closes the connection
// it is made on — so the gateway's connection stays up and carries
// messages as before; bridge.delay is off, logged once, and nothing is
// published to it.
func TestDelayOffOnRabbitMQ(t *testing.T) {
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokerURL(t), Heartbeat: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for tr.DelayState().Reason == "not probed yet" && ctx.Err() == nil { // the probe runs beside the connect
		time.Sleep(5 * time.Millisecond)
	}
	if s := tr.DelayState(); s.On || s.Reason != "no x-delayed-message on this broker" {
		t.Fatalf("delay state on a RabbitMQ without the plugin: %+v", s)
	}
	if got := tr.DelayState().String(); got != "bridge.delay: off (no x-delayed-message on this broker)" {
		t.Fatalf("shown as %q", got)
	}

	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 10}); err != nil {
		t.Fatal(err)
	}
	defer tr.DeleteInbox(context.Background(), gid)
	got := make(chan string, 1)
	sub, err := tr.Consume(ctx, gid, 4, func(d bridge.Delivery) { _ = d.Acker.Ack(); got <- d.Env.MsgID })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSend, MsgID: uuid.NewString(), From: uuid.NewString(), To: gid,
		Host: "h1", TS: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Body: []byte("after the probe")}
	if err := tr.Publish(ctx, gid, env, true); err != nil {
		t.Fatalf("publish on the gateway's connection after the probe: %v", err)
	}
	select {
	case id := <-got:
		if id != env.MsgID {
			t.Fatalf("consumed %s, want %s", id, env.MsgID)
		}
	case <-ctx.Done():
		t.Fatal("the message published after the probe never arrived")
	}
	if c := tr.Counts(); c.Reconnects != 0 || !tr.Connected() {
		t.Fatalf("the probe disturbed the gateway's connection: connected %v, %+v", tr.Connected(), c)
	}
	if err := tr.PublishDelayed(ctx, gid, env, time.Second); !errors.Is(err, bridge.ErrDelayOff) {
		t.Fatalf("PublishDelayed with bridge.delay off: %v", err)
	}
	if n := strings.Count(logs.String(), "bridge.delay off"); n != 1 {
		t.Fatalf("bridge.delay off logged %d times:\n%s", n, logs.String())
	}
	assertNoDelayExchange(t)
}

// assertNoDelayExchange: the probe left nothing behind on the broker.
func assertNoDelayExchange(t *testing.T) {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var ae *amqp.Error
	err = ch.ExchangeDeclarePassive(broker.ExchangeDelay, "x-delayed-message", true, false, false, false, nil)
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		t.Fatalf("passive declare of %s: %v, want NOT_FOUND", broker.ExchangeDelay, err)
	}
}
