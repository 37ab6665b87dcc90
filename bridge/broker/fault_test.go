package broker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
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
