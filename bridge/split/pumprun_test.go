package split_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/split"
)

// switchable is the real broker with a switch on Connected: turned off,
// the split transport spools as in an outage while the broker stays up,
// so an outbox fills without a broker restart.
type switchable struct {
	*broker.Transport
	off atomic.Bool
}

func (s *switchable) Connected() bool { return !s.off.Load() && s.Transport.Connected() }

// collector is an inbox consumed on the peer broker connection, its
// bodies in delivery order.
type collector struct {
	mu  sync.Mutex
	got []string
}

func (c *collector) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func collect(t *testing.T, peer *broker.Transport, gid string) *collector {
	t.Helper()
	ctx := context.Background()
	if err := peer.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	sub, err := peer.Consume(ctx, gid, 256, func(d bridge.Delivery) {
		if d.Env != nil {
			c.mu.Lock()
			c.got = append(c.got, string(d.Env.Body))
			c.mu.Unlock()
		}
		_ = d.Acker.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	return c
}

// TestOutboxDrainsAtTheBrokersRate (the kill -9 test's 30 s of `queued`):
// an outbox is published in windows whose confirms overlap, not one
// confirmed message at a time — a pump doing that drains at about one
// sender's rate, slower than a few senders together, so the outbox never
// empties while they last. The overlap is what is checked (the broker
// link's peak of unconfirmed publishes: the one-at-a-time sends before
// cannot raise it past 1); the time against one sender's confirmed sends
// is logged, not asserted: on a loaded machine sharing the broker it
// swung from 2.8x to 20x (a CI run failed a 3x floor), and timings are the
// benchmarks' to judge. And the outbox arrives whole, in its order.
func TestOutboxDrainsAtTheBrokersRate(t *testing.T) {
	const n = 384 // three windows
	peer := openBroker(t)
	t.Cleanup(func() { _ = peer.Close() })
	gid := uuid.NewString()
	got := collect(t, peer, gid)
	sw := &switchable{Transport: openBroker(t)}
	a := open(t, filepath.Join(t.TempDir(), "local.db"), sw,
		split.Options{Host: "ha", FailoverGrace: time.Millisecond, RetryEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []string
	send := func(body string) error {
		want = append(want, body)
		return a.Publish(ctx, gid, env("ha", gid, body, time.Hour), true)
	}
	start := time.Now()
	for i := range n {
		if err := send(fmt.Sprintf("direct-%d", i)); err != nil {
			t.Fatalf("direct send %d: %v", i, err)
		}
	}
	direct := time.Since(start)
	sw.off.Store(true)
	for i := range n {
		if err := send(fmt.Sprintf("spooled-%d", i)); !errors.Is(err, bridge.ErrSpooled) {
			t.Fatalf("send %d with the link off: %v, want ErrSpooled", i, err)
		}
	}
	start = time.Now()
	sw.off.Store(false)
	for m, _ := a.Outbox(); m > 0; m, _ = a.Outbox() {
		if ctx.Err() != nil {
			t.Fatalf("the outbox still holds %d of %d", m, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	drain := time.Since(start)
	ratio := direct.Seconds() / drain.Seconds()
	t.Logf("%d sends one at a time %v (%.0f/s), the outbox of %d drained in %v (%.0f/s): %.1fx",
		n, direct.Round(time.Millisecond), n/direct.Seconds(), n, drain.Round(time.Millisecond), n/drain.Seconds(), ratio)
	if peak := sw.Counts().PeakUnconfirmed; peak < 2 {
		t.Errorf("the outbox was published one confirmed message at a time (peak %d unconfirmed), not in windows", peak)
	}
	for len(got.bodies()) < len(want) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if g := got.bodies(); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("received %d messages, not the %d sent in order: first %v", len(g), len(want), g[:min(len(g), 5)])
	}
}

// TestOutboxRunJudgedLikeOnePublish: within one pipelined window, a
// message the broker settles against it (an inbox at its cap, no inbox at
// all) or that expired in the outbox is given up with the reason a
// one-at-a-time pump gave, the rest of the window still goes, in order.
func TestOutboxRunJudgedLikeOnePublish(t *testing.T) {
	peer := openBroker(t)
	t.Cleanup(func() { _ = peer.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good, full, gone := uuid.NewString(), uuid.NewString(), uuid.NewString()
	got := collect(t, peer, good)
	if err := peer.DeclareInbox(ctx, full, bridge.InboxSpec{MaxLength: 1}); err != nil {
		t.Fatal(err)
	}
	sw := &switchable{Transport: openBroker(t)}
	sw.off.Store(true)
	local, err := embedded.Open(filepath.Join(t.TempDir(), "local.db"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := split.New(local, sw, split.Options{Host: "ha", FailoverGrace: time.Millisecond, RetryEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	undel := map[string]string{}
	a.Start(func(env *bridge.Envelope, reason string) {
		mu.Lock()
		undel[string(env.Body)] = reason
		mu.Unlock()
	})
	t.Cleanup(func() { _ = a.Close() })
	sends := []struct{ key, body string }{{good, "good-0"}, {full, "full-0"}, {full, "full-1"}, {good, "good-1"},
		{gone, "gone"}, {good, "short"}, {good, "good-2"}}
	for _, s := range sends {
		ttl := time.Hour
		if s.body == "short" {
			ttl = 50 * time.Millisecond
		}
		if err := a.Publish(ctx, s.key, env("ha", s.key, s.body, ttl), true); !errors.Is(err, bridge.ErrSpooled) {
			t.Fatalf("%s with the link off: %v, want ErrSpooled", s.body, err)
		}
	}
	time.Sleep(100 * time.Millisecond) // "short" expires in the outbox
	sw.off.Store(false)
	for m, _ := a.Outbox(); m > 0; m, _ = a.Outbox() {
		if ctx.Err() != nil {
			t.Fatalf("the outbox still holds %d", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for len(got.bodies()) < 3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if g := fmt.Sprint(got.bodies()); g != "[good-0 good-1 good-2]" {
		t.Fatalf("%s received %s, want [good-0 good-1 good-2]", good, g)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{
		"full-1": "published from ha's outbox after a broker outage, but the recipient's inbox is full",
		"gone":   "published from ha's outbox after a broker outage, but no inbox takes it: its recipient is gone",
		"short":  "expired in ha's outbox while the broker was unreachable",
	}
	if fmt.Sprint(undel) != fmt.Sprint(want) {
		t.Fatalf("reported undeliverable %q, want %q", undel, want)
	}
}
