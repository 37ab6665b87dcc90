package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// TestCounts: the totals the gateway's metrics read move with what the
// broker did — publishes and their confirms, a nack from an inbox at its
// cap, a mandatory publish returned unroutable, and a reconnect after the
// broker closed the connection.
func TestCounts(t *testing.T) {
	tr := open(t)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 1}); err != nil {
		t.Fatal(err)
	}
	defer tr.DeleteInbox(context.Background(), gid)
	env := func(to string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: to, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
	}
	if err := tr.Publish(ctx, gid, env(gid), true); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, gid, env(gid), true); !errors.Is(err, bridge.ErrInboxFull) {
		t.Fatalf("over the cap: %v, want inbox full", err)
	}
	nobody := uuid.NewString()
	if err := tr.Publish(ctx, nobody, env(nobody), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Fatalf("to no inbox: %v, want unroutable", err)
	}
	got := tr.Counts()
	want := broker.Counts{Publishes: 3, Confirms: 2, Nacks: 1, Returns: 1, PeakUnconfirmed: 1}
	if got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	rmqctl(t, "close_all_connections", "metrics test: reconnect")
	deadline := time.Now().Add(20 * time.Second)
	for tr.Counts().Reconnects == 0 || !tr.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect counted: %+v", tr.Counts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
