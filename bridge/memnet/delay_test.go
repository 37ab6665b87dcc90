package memnet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
)

func delayEnv(to string) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindFailed, MsgID: uuid.NewString(), From: uuid.NewString(), To: to,
		Host: "h1", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("delayed")}
}

// TestDelayExchange: on a network with the delay exchange a delayed
// publish lands in its inbox when due, not before, and outlives the
// connection that published it; off, it is refused; while the link is
// down it fails at once (a copy never waits for the link); one not yet
// due when the network closes is dropped with its timer.
func TestDelayExchange(t *testing.T) {
	ctx := context.Background()
	n := memnet.New(memnet.Options{Delay: true})
	t.Cleanup(n.Close)
	pub, other := n.Connect(), n.Connect()
	defer other.Close()
	gid := uuid.NewString()
	if err := other.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishDelayed(ctx, gid, delayEnv(gid), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_ = pub.Close() // the publisher goes; the network keeps what it took
	if ready, _, _ := n.Depth(bridge.InboxQueueName(gid)); ready != 0 {
		t.Fatalf("%d in the inbox before the delay", ready)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ready, _, _ := n.Depth(bridge.InboxQueueName(gid)); ready != 1; ready, _, _ = n.Depth(bridge.InboxQueueName(gid)) {
		if time.Now().After(deadline) {
			t.Fatalf("the delayed message never landed (%d in the inbox)", ready)
		}
		time.Sleep(10 * time.Millisecond)
	}

	other.LinkDown()
	start := time.Now()
	if err := other.PublishDelayed(ctx, gid, delayEnv(gid), time.Hour); !errors.Is(err, bridge.ErrUnavailable) || time.Since(start) > time.Second {
		t.Fatalf("delayed publish while the link is down: %v after %v", err, time.Since(start))
	}
	other.LinkUp()
	if err := other.PublishDelayed(ctx, gid, delayEnv(gid), time.Hour); err != nil {
		t.Fatal(err)
	}
	if taken, pending := n.Delayed(); taken != 2 || pending != 1 {
		t.Fatalf("delayed: %d taken, %d pending; want 2, 1", taken, pending)
	}
	n.Close()
	if _, pending := n.Delayed(); pending != 0 {
		t.Fatalf("%d delayed messages pending after the network closed", pending)
	}

	off := network(t).Connect()
	if err := off.PublishDelayed(ctx, gid, delayEnv(gid), time.Second); !errors.Is(err, bridge.ErrDelayOff) {
		t.Fatalf("delayed publish on a network without the exchange: %v", err)
	}
}
