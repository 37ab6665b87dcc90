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

// TestCountsDeliveries: every delivery is counted under the kind of queue
// it came from — what make scale sums over the gateways as the broker's
// presence traffic.
func TestCountsDeliveries(t *testing.T) {
	tr := open(t)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host := "counts-" + uuid.NewString()[:8]
	got := make(chan struct{}, 16)
	take := func(d bridge.Delivery) { _ = d.Acker.Ack(); got <- struct{}{} }
	psub, err := tr.ConsumePresence(ctx, host, take)
	if err != nil {
		t.Fatal(err)
	}
	defer psub.Cancel()
	csub, err := tr.ConsumeControl(ctx, host, take)
	if err != nil {
		t.Fatal(err)
	}
	defer csub.Cancel()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	defer tr.DeleteInbox(context.Background(), gid)
	isub, err := tr.Consume(ctx, gid, 8, take)
	if err != nil {
		t.Fatal(err)
	}
	defer isub.Cancel()
	env := func(kind bridge.Kind, to string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: 1, Kind: kind, MsgID: uuid.NewString(), From: uuid.NewString(), To: to, Host: host, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("{}")}
	}
	if err := tr.PublishPresence(ctx, env(bridge.KindPresence, "")); err != nil {
		t.Fatal(err)
	}
	if err := tr.PublishControl(ctx, host, env(bridge.KindReply, "")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := tr.Publish(ctx, gid, env(bridge.KindReply, gid), true); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatalf("deliveries missing: %+v", tr.Counts())
		}
	}
	c := tr.Counts()
	if c.PresenceDeliveries != 1 || c.ControlDeliveries != 1 || c.InboxDeliveries != 2 || c.DeadLetterDeliveries != 0 {
		t.Fatalf("deliveries presence %d, control %d, inbox %d, dead letters %d; want 1, 1, 2, 0",
			c.PresenceDeliveries, c.ControlDeliveries, c.InboxDeliveries, c.DeadLetterDeliveries)
	}
}

// TestCountsPublishRun: a run's publishes are all in the confirm window
// from their write (they were counted into it one at a time, as each
// confirm was awaited: the unconfirmed gauge and its peak never showed a
// run's window).
func TestCountsPublishRun(t *testing.T) {
	tr := open(t)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	defer tr.DeleteInbox(context.Background(), gid)
	run := make([]bridge.Outgoing, 8)
	for i := range run {
		now := time.Now()
		run[i] = bridge.Outgoing{Key: gid, Mandatory: true, Env: &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(),
			From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}}
	}
	for i, err := range tr.PublishRun(ctx, run) {
		if err != nil {
			t.Fatalf("run message %d: %v", i, err)
		}
	}
	got := tr.Counts()
	if got.Publishes != 8 || got.Confirms != 8 || got.Unconfirmed != 0 || got.PeakUnconfirmed != 8 {
		t.Fatalf("counts %+v, want 8 publishes, 8 confirms, 0 unconfirmed after, a peak of 8 (the run written before its confirms)", got)
	}
}
