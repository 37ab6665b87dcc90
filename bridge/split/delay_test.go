package split_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/split"
)

// TestDelayPassesToTheBroker: the split transport's delay is its
// broker's — on where the broker has the exchange, off (saying why) where
// it has not; a delayed copy for an inbox of this host goes to the
// broker's side of that inbox, whose consumer is this host's; with the
// broker down it fails at once and nothing enters the outbox (a copy is
// beside a retry the caller keeps, never a message to spool).
func TestDelayPassesToTheBroker(t *testing.T) {
	ctx := context.Background()
	off := open(t, filepath.Join(t.TempDir(), "off.db"), network(t).Connect(), split.Options{})
	if s := off.DelayState(); s.On || s.Reason != "no x-delayed-message on this broker" {
		t.Fatalf("split over a broker without the exchange: %+v", s)
	}

	n := memnet.New(memnet.Options{Delay: true})
	t.Cleanup(n.Close)
	link := n.Connect()
	tr := open(t, filepath.Join(t.TempDir(), "on.db"), link, split.Options{})
	if s := tr.DelayState(); !s.On {
		t.Fatalf("split over a broker with the exchange: %+v", s)
	}
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	sub, err := tr.Consume(ctx, gid, 4, func(d bridge.Delivery) {
		_ = d.Acker.Ack()
		if d.Env == nil {
			got <- "malformed: " + d.Err.Error()
			return
		}
		got <- d.Env.MsgID
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	now := time.Now()
	env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSend, MsgID: uuid.NewString(), From: uuid.NewString(), To: gid,
		Host: conformanceHost, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("a copy")}
	if err := tr.PublishDelayed(ctx, gid, env, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != env.MsgID {
			t.Fatalf("consumed %s, want %s", id, env.MsgID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the delayed copy never reached this host's consumer")
	}

	link.LinkDown()
	if err := tr.PublishDelayed(ctx, gid, env, time.Minute); !errors.Is(err, bridge.ErrUnavailable) {
		t.Fatalf("delayed publish with the broker down: %v", err)
	}
	if msgs, _ := tr.Outbox(); msgs != 0 {
		t.Fatalf("%d in the outbox after a delayed publish with the broker down", msgs)
	}
	link.LinkUp()
}
