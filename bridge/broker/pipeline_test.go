package broker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// The pipelining tests put a proxy between the transport and the broker
// and hold what the broker sends back: publishes reach the broker, their
// confirms wait in the proxy. What the transport does with a window of
// unconfirmed publishes is then seen in its counters, not in timing.

// proxied opens a transport that reaches the test broker through a proxy.
func proxied(t *testing.T) (*broker.Transport, *brokertest.Proxy) {
	t.Helper()
	p, url := brokertest.NewProxy(t, brokerURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, p
}

func inbox(t *testing.T, tr *broker.Transport, max int) string {
	t.Helper()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	return gid
}

func testEnv(to string) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: to, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
}

// waitCounts waits until ok holds for the transport's counts.
func waitCounts(t *testing.T, tr *broker.Transport, what string, ok func(broker.Counts) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(tr.Counts()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: counts %+v", what, tr.Counts())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publishAsync publishes env to key in the background; its result arrives
// on the returned channel.
func publishAsync(tr *broker.Transport, key string, env *bridge.Envelope) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- tr.Publish(ctx, key, env, true)
	}()
	return done
}

// drainIDs takes every message off gid's inbox (on a connection of its
// own) and returns their msgIds.
func drainIDs(t *testing.T, gid string) []string {
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
	var ids []string
	for {
		d, ok, err := ch.Get(bridge.InboxQueueName(gid), true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ids
		}
		ids = append(ids, d.MessageId)
	}
}

// TestPublishesShareTheConfirmWindow: with the broker's confirms held
// back, n concurrent publishes on the one publish channel are all sent and
// all awaiting their confirm at once — none waits for another's confirm
// before it is sent — and once the confirms flow every one of them is
// confirmed, each published once.
func TestPublishesShareTheConfirmWindow(t *testing.T) {
	tr, p := proxied(t)
	gid := inbox(t, tr, 10000)
	const n = 64
	p.Hold()
	defer p.Release() // before the cleanups: a test that failed holding must not hang them
	var done []<-chan error
	for i := 0; i < n; i++ {
		done = append(done, publishAsync(tr, gid, testEnv(gid)))
	}
	waitCounts(t, tr, "all publishes in flight at once", func(c broker.Counts) bool { return c.Unconfirmed == n })
	if c := tr.Counts(); c.Confirms != 0 {
		t.Fatalf("confirms arrived through a held link: %+v", c)
	}
	p.Release()
	for i, d := range done {
		if err := <-d; err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	c := tr.Counts()
	if c.Publishes != n || c.Confirms != n || c.PeakUnconfirmed != n || c.Unconfirmed != 0 {
		t.Fatalf("counts %+v, want %d publishes, confirms and peak window, none unconfirmed", c, n)
	}
	if ids := drainIDs(t, gid); len(ids) != n {
		t.Fatalf("inbox holds %d messages, want %d", len(ids), n)
	}
}

// TestNackInPipelineFailsOnlyItsSend: in one window of unconfirmed
// publishes, one to an inbox at its cap (nacked) and one to no inbox
// (returned) sit between publishes to a roomy inbox; the broker settles the
// window together, and only those two publishes fail, each with its own
// reason.
func TestNackInPipelineFailsOnlyItsSend(t *testing.T) {
	tr, p := proxied(t)
	roomy, full := inbox(t, tr, 10000), inbox(t, tr, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Publish(ctx, full, testEnv(full), true); err != nil {
		t.Fatal(err)
	}
	nobody := uuid.NewString()
	keys := []string{roomy, roomy, roomy, roomy, roomy, full, nobody, roomy, roomy, roomy, roomy, roomy}
	p.Hold()
	defer p.Release() // before the cleanups: a test that failed holding must not hang them
	done := make([]<-chan error, len(keys))
	for i, key := range keys { // one at a time into the window: the broker sees this order
		done[i] = publishAsync(tr, key, testEnv(key))
		waitCounts(t, tr, "publish in flight", func(c broker.Counts) bool { return c.Unconfirmed == uint64(i+1) })
	}
	p.Release()
	for i, key := range keys {
		err := <-done[i]
		switch key {
		case full:
			if !errors.Is(err, bridge.ErrInboxFull) {
				t.Errorf("publish %d into the full inbox: %v, want inbox full", i, err)
			}
		case nobody:
			if !errors.Is(err, bridge.ErrUnroutable) {
				t.Errorf("publish %d to no inbox: %v, want unroutable", i, err)
			}
		default:
			if err != nil {
				t.Errorf("publish %d into the roomy inbox: %v", i, err)
			}
		}
	}
	if c := tr.Counts(); c.Nacks != 1 || c.Returns != 1 || c.PeakUnconfirmed != uint64(len(keys)) {
		t.Fatalf("counts %+v, want 1 nack, 1 return, a window of %d", c, len(keys))
	}
	if ids := drainIDs(t, roomy); len(ids) != 10 {
		t.Fatalf("roomy inbox holds %d, want 10", len(ids))
	}
}

// TestCutMidWindowPublishesAgain: the link is cut while n publishes await
// their confirms. Their outcome is unknown, so each is published again
// (same msgId) once the transport has reconnected, and every send
// succeeds; the inbox has every msgId — some twice, for the receiver's
// deduplication.
func TestCutMidWindowPublishesAgain(t *testing.T) {
	tr, p := proxied(t)
	gid := inbox(t, tr, 10000)
	const n = 32
	p.Hold()
	defer p.Release() // before the cleanups: a test that failed holding must not hang them
	var done []<-chan error
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		env := testEnv(gid)
		want[env.MsgID] = true
		done = append(done, publishAsync(tr, gid, env))
	}
	waitCounts(t, tr, "all publishes in flight", func(c broker.Counts) bool { return c.Unconfirmed == n })
	p.Cut()
	p.Release()
	for i, d := range done {
		if err := <-d; err != nil {
			t.Fatalf("publish %d after the cut: %v", i, err)
		}
	}
	c := tr.Counts()
	if c.Reconnects < 1 || c.Publishes < 2*n || c.Confirms != n {
		t.Fatalf("counts %+v, want a reconnect, every publish sent again (≥ %d) and %d confirms", c, 2*n, n)
	}
	got := map[string]bool{}
	for _, id := range drainIDs(t, gid) {
		got[id] = true
	}
	for id := range want {
		if !got[id] {
			t.Fatalf("msgId %s never reached the inbox", id)
		}
	}
	if len(got) != n {
		t.Fatalf("%d distinct msgIds in the inbox, want %d", len(got), n)
	}
}

// TestInboxesHandledInParallelInOrder: each inbox has a consumer of its
// own, so the core's verification of one inbox's deliveries (done in the
// handler) never waits for another's — here inbox A's handler is stuck on
// its first message while inbox B's takes all of its messages — and each
// inbox's messages reach its handler in the order they were published.
func TestInboxesHandledInParallelInOrder(t *testing.T) {
	tr := open(t)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := inbox(t, tr, 10000), inbox(t, tr, 10000)
	const n = 100
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	got := map[string]chan string{a: make(chan string, n), b: make(chan string, n)}
	for _, gid := range []string{a, b} {
		sub, err := tr.Consume(ctx, gid, 16, func(d bridge.Delivery) {
			if gid == a {
				once.Do(func() { close(stuck); <-release })
			}
			got[gid] <- d.Env.MsgID
			_ = d.Acker.Ack()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Cancel()
	}
	unstick := sync.OnceFunc(func() { close(release) })
	defer unstick() // a failed test must not leave a handler waiting
	sent := map[string][]string{}
	for i := 0; i < n; i++ { // interleaved, each publish confirmed before the next
		for _, gid := range []string{a, b} {
			env := testEnv(gid)
			if err := tr.Publish(ctx, gid, env, true); err != nil {
				t.Fatal(err)
			}
			sent[gid] = append(sent[gid], env.MsgID)
		}
	}
	<-stuck
	checkOrder(t, "inbox B while A's handler is stuck", got[b], sent[b])
	unstick()
	checkOrder(t, "inbox A once released", got[a], sent[a])
}

// checkOrder reads len(want) msgIds from got and compares the order.
func checkOrder(t *testing.T, what string, got <-chan string, want []string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for i, id := range want {
		select {
		case g := <-got:
			if g != id {
				t.Fatalf("%s: message %d is %s, want %s (out of order)", what, i, g, id)
			}
		case <-timeout:
			t.Fatalf("%s: %d of %d handled", what, i, len(want))
		}
	}
}

// TestCloseEndsPublishesInFlight: Close while publishes wait for their
// confirms, held back, ends every one of them with an error or a confirm,
// never a hang, and leaves no goroutine behind (goleak).
func TestCloseEndsPublishesInFlight(t *testing.T) {
	tr, p := proxied(t)
	gid := inbox(t, tr, 10000)
	const n = 32
	p.Hold()
	defer p.Release()
	var done []<-chan error
	for i := 0; i < n; i++ {
		done = append(done, publishAsync(tr, gid, testEnv(gid)))
	}
	waitCounts(t, tr, "publishes in flight", func(c broker.Counts) bool { return c.Unconfirmed > 0 })
	p.Cut() // Close need not wait for the broker's close-ok through a held link
	tr.Close()
	timeout := time.After(20 * time.Second)
	for i, d := range done {
		select {
		case <-d:
		case <-timeout:
			t.Fatalf("publish %d still waiting after Close", i)
		}
	}
}
