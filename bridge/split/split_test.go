package split_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/split"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conformanceHost is the host of the suite's envelopes: its broadcasts
// come back through the network and must be skipped, as a gateway's own.
const conformanceHost = "conformance-host"

// open composes a fresh (or reopened) local store at path with remote.
func open(t *testing.T, path string, remote split.Remote, opts split.Options) *split.Transport {
	t.Helper()
	local, err := embedded.Open(path, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Host == "" {
		opts.Host = conformanceHost
	}
	tr, err := split.New(local, remote, opts)
	if err != nil {
		t.Fatal(err)
	}
	tr.Start(nil)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func network(t *testing.T) *memnet.Network {
	n := memnet.New(memnet.Options{})
	t.Cleanup(n.Close)
	return n
}

// TestConformance: the split transport over the in-memory network passes
// the suite every transport passes.
func TestConformance(t *testing.T) {
	paths := sync.Map{} // transport -> its local file
	nets := sync.Map{}  // transport -> its network
	newOn := func(t *testing.T, n *memnet.Network, path string) bridge.Transport {
		tr := open(t, path, n.Connect(), split.Options{})
		paths.Store(tr, path)
		nets.Store(tr, n)
		return tr
	}
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport {
			return newOn(t, network(t), filepath.Join(t.TempDir(), "local.db"))
		},
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			path, _ := paths.Load(old)
			n, _ := nets.Load(old)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return newOn(t, n.(*memnet.Network), path.(string))
		},
		Peer: func(t *testing.T, tr bridge.Transport) bridge.Transport {
			n, _ := nets.Load(tr)
			return n.(*memnet.Network).Connect()
		},
		Grace: 100 * time.Millisecond,
		// every subtest runs at once, each with its own store and
		// network: on a loaded 2-core machine under -race a wait may
		// take longer than the default 5 s
		Timeout:  15 * time.Second,
		Parallel: true,
	})
}

// rig is two hosts on one network: a split transport on host a (the one
// under test, its link to the network controllable) and a plain network
// transport for host b.
type rig struct {
	t      *testing.T
	link   *memnet.Transport
	a      *split.Transport
	b      *memnet.Transport
	mu     sync.Mutex
	undel  []string
	gotMu  sync.Mutex
	got    map[string][]string // gid -> bodies, in delivery order
	notify chan struct{}
}

func newRig(t *testing.T, opts split.Options) *rig {
	n := network(t)
	r := &rig{t: t, link: n.Connect(), b: n.Connect(), got: map[string][]string{}, notify: make(chan struct{}, 1)}
	t.Cleanup(func() { _ = r.b.Close() })
	local, err := embedded.Open(filepath.Join(t.TempDir(), "local.db"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Host = "ha"
	if opts.RetryEvery == 0 {
		opts.RetryEvery = 10 * time.Millisecond
	}
	if r.a, err = split.New(local, r.link, opts); err != nil {
		t.Fatal(err)
	}
	r.a.Start(func(env *bridge.Envelope, reason string) {
		r.mu.Lock()
		r.undel = append(r.undel, string(env.Body)+": "+reason)
		r.mu.Unlock()
	})
	t.Cleanup(func() { _ = r.a.Close() })
	return r
}

// inbox declares gid on tr and records what it receives (acked).
func (r *rig) inbox(tr bridge.Transport, groups ...string) string {
	gid := uuid.NewString()
	ctx := context.Background()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{Groups: groups, MaxLength: 1000}); err != nil {
		r.t.Fatal(err)
	}
	sub, err := tr.Consume(ctx, gid, 16, func(d bridge.Delivery) {
		if d.Env == nil {
			r.t.Errorf("undecodable delivery: %v", d.Err)
			_ = d.Acker.Ack()
			return
		}
		r.gotMu.Lock()
		r.got[gid] = append(r.got[gid], string(d.Env.Body))
		r.gotMu.Unlock()
		_ = d.Acker.Ack()
		select {
		case r.notify <- struct{}{}:
		default:
		}
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(sub.Cancel)
	return gid
}

func (r *rig) received(gid string) []string {
	r.gotMu.Lock()
	defer r.gotMu.Unlock()
	return append([]string(nil), r.got[gid]...)
}

func (r *rig) waitFor(gid string, n int) []string {
	r.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if got := r.received(gid); len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			r.t.Fatalf("%s received %v, want %d messages", gid, r.received(gid), n)
		}
	}
}

func env(host, to, body string, ttl time.Duration) *bridge.Envelope {
	ts := time.UnixMilli(time.Now().UnixMilli())
	kind := bridge.KindReply
	if bridge.IsBroadcastKey(to) {
		kind = bridge.KindBroadcast
	}
	return &bridge.Envelope{V: bridge.Version, Kind: kind, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
		From: uuid.NewString(), To: to, Host: host, TS: ts, ExpiresAt: ts.Add(ttl), Body: []byte(body), Sig: make([]byte, 64)}
}

func (r *rig) publish(key, body string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.a.Publish(ctx, key, env("ha", key, body, time.Minute), true)
}

// TestSameHostNeverTouchesTheBroker: with the link down, a message between
// two inboxes of this host is delivered at once.
func TestSameHostNeverTouchesTheBroker(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute})
	gid := r.inbox(r.a)
	r.link.LinkDown()
	start := time.Now()
	if err := r.publish(gid, "local"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("a same-host publish waited %v for the broker", d)
	}
	r.waitFor(gid, 1)
	if n, _ := r.a.Outbox(); n != 0 {
		t.Fatalf("a same-host message went to the outbox (%d)", n)
	}
}

// TestSpooledWhileDownPublishedInOrderOnce: messages for another host
// accepted while the link is down are ErrSpooled at once, and after LinkUp
// arrive in order, each once; then the outbox is empty and publishes go
// straight to the broker again.
func TestSpooledWhileDownPublishedInOrderOnce(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute})
	remote := r.inbox(r.b)
	if err := r.publish(remote, "m00"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(remote, 1)
	r.link.LinkDown()
	want := []string{"m00"}
	for i := 1; i <= 20; i++ {
		body := fmt.Sprintf("m%02d", i)
		if err := r.publish(remote, body); !errors.Is(err, bridge.ErrSpooled) {
			t.Fatalf("publish %s with the link down: %v, want ErrSpooled", body, err)
		}
		want = append(want, body)
	}
	if n, _ := r.a.Outbox(); n != 20 {
		t.Fatalf("outbox holds %d, want 20", n)
	}
	r.link.LinkUp()
	got := r.waitFor(remote, len(want))
	time.Sleep(50 * time.Millisecond) // a duplicate would show up now
	got = r.received(remote)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %v, want %v", got, want)
	}
	emptied(t, r.a)
	if err := r.publish(remote, "after"); err != nil {
		t.Fatalf("publish after the outbox drained: %v", err)
	}
	r.waitFor(remote, len(want)+1)
}

// TestFailModeBounded: with Outage fail, a message for another host fails
// within the bound, saying the broker is unavailable, and nothing is kept.
func TestFailModeBounded(t *testing.T) {
	r := newRig(t, split.Options{Outage: split.Fail, Bound: 200 * time.Millisecond})
	remote := r.inbox(r.b)
	r.link.LinkDown()
	start := time.Now()
	err := r.publish(remote, "x")
	if !errors.Is(err, bridge.ErrUnavailable) {
		t.Fatalf("publish with the link down in fail mode: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("fail mode took %v", d)
	}
	if n, _ := r.a.Outbox(); n != 0 {
		t.Fatalf("fail mode spooled %d", n)
	}
}

// TestFailModeKeepsNotices: in fail mode a notice for another host is
// still kept in the outbox with the link down and published when it
// returns. Fail mode tells a caller its message did not go; a FAILED or
// INJECTED has no caller — its publisher (bridge's publishAll) only logs
// the failure — so before, it was lost and its addressee heard nothing.
func TestFailModeKeepsNotices(t *testing.T) {
	r := newRig(t, split.Options{Outage: split.Fail, Bound: 200 * time.Millisecond})
	remote := r.inbox(r.b)
	r.link.LinkDown()
	n := env("ha", remote, "FAILED about a brief", time.Minute)
	n.Kind, n.Corr = bridge.KindFailed, uuid.NewString()
	if err := r.a.Publish(context.Background(), remote, n, true); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("a notice with the link down in fail mode: %v, want ErrSpooled", err)
	}
	if err := r.publish(remote, "a reply"); !errors.Is(err, bridge.ErrUnavailable) || errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("a reply with the link down in fail mode: %v, want ErrUnavailable", err)
	}
	r.link.LinkUp()
	if got := r.waitFor(remote, 1); len(got) != 1 || got[0] != "FAILED about a brief" {
		t.Fatalf("after the link returned %s received %q, want only the notice", remote, got)
	}
	emptied(t, r.a)
}

// TestOutboxCapRefuses: past the outbox cap a publish fails, saying so.
func TestOutboxCapRefuses(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute, OutboxMaxMessages: 2})
	remote := r.inbox(r.b)
	r.link.LinkDown()
	for i := 0; i < 2; i++ {
		if err := r.publish(remote, "x"); !errors.Is(err, bridge.ErrSpooled) {
			t.Fatal(err)
		}
	}
	err := r.publish(remote, "x")
	if !errors.Is(err, bridge.ErrUnavailable) || errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("third publish over a cap of 2: %v, want ErrUnavailable", err)
	}
	t.Logf("over the cap: %v", err)
}

// TestUndeliverableReported: a spooled message that expired in the outbox,
// or whose recipient is gone when the link returns, is reported to the
// Start callback instead of vanishing.
func TestUndeliverableReported(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute})
	remote := r.inbox(r.b)
	r.link.LinkDown()
	ctx := context.Background()
	if err := r.a.Publish(ctx, remote, env("ha", remote, "short", 50*time.Millisecond), true); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatal(err)
	}
	gone := uuid.NewString()
	if err := r.a.Publish(ctx, gone, env("ha", gone, "nobody", time.Minute), true); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	r.link.LinkUp()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.undel)
		undel := append([]string(nil), r.undel...)
		r.mu.Unlock()
		if n == 2 {
			t.Logf("reported: %q", undel)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reported %q, want both messages", undel)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.received(remote); len(got) != 0 {
		t.Fatalf("the expired message was delivered: %v", got)
	}
}

// TestBroadcastOnceEachSide: a broadcast reaches this host's inbox once
// (the copy back through the network is skipped) and the other host's.
func TestBroadcastOnceEachSide(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute})
	here, there := r.inbox(r.a), r.inbox(r.b)
	ctx := context.Background()
	if err := r.a.Publish(ctx, bridge.BroadcastAll, env("ha", bridge.BroadcastAll, "all", time.Minute), false); err != nil {
		t.Fatal(err)
	}
	r.waitFor(there, 1)
	r.waitFor(here, 1)
	// down: this host's copy still arrives, the other's waits in the outbox
	r.link.LinkDown()
	if err := r.a.Publish(ctx, bridge.BroadcastAll, env("ha", bridge.BroadcastAll, "all2", time.Minute), false); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("broadcast with the link down: %v, want ErrSpooled", err)
	}
	r.waitFor(here, 2)
	r.link.LinkUp()
	r.waitFor(there, 2)
	time.Sleep(100 * time.Millisecond)
	if got := r.received(here); len(got) != 2 {
		t.Fatalf("this host's inbox got %v, want each broadcast once", got)
	}
}

// TestOutboxSurvivesRestart: what was spooled when the transport closed is
// published by the next one over the same file.
func TestOutboxSurvivesRestart(t *testing.T) {
	n := network(t)
	b := n.Connect()
	t.Cleanup(func() { _ = b.Close() })
	remote := uuid.NewString()
	ctx := context.Background()
	if err := b.DeclareInbox(ctx, remote, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "local.db")
	link := n.Connect()
	a := open(t, path, link, split.Options{Host: "ha"})
	link.LinkDown()
	if err := a.Publish(ctx, remote, env("ha", remote, "kept", time.Minute), true); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = open(t, path, n.Connect(), split.Options{Host: "ha", RetryEvery: 10 * time.Millisecond})
	got := make(chan string, 4)
	sub, err := b.Consume(ctx, remote, 4, func(d bridge.Delivery) { got <- string(d.Env.Body); _ = d.Acker.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	select {
	case body := <-got:
		if body != "kept" {
			t.Fatalf("got %q", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the spooled message was not published after the restart")
	}
	emptied(t, a)
}

// emptied waits until a's outbox is empty: the pump removes a message just
// after the broker confirmed it, so maybe after it was consumed.
func emptied(t *testing.T, a *split.Transport) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := a.Outbox(); n == 0 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("outbox holds %d", n)
		}
	}
}

// TestInboxDeclaredDuringOutage: an inbox declared and consumed while the
// link is down works for this host at once, and takes messages from other
// hosts once the link is back.
func TestInboxDeclaredDuringOutage(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute})
	r.link.LinkDown()
	done := make(chan string)
	go func() { done <- r.inbox(r.a) }()
	var gid string
	select {
	case gid = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("declaring an inbox waited for the broker")
	}
	if err := r.publish(gid, "local"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(gid, 1)
	r.link.LinkUp()
	ctx := context.Background()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := r.b.Publish(ctx, gid, env("hb", gid, "remote", time.Minute), true)
		if err == nil {
			break
		}
		if !errors.Is(err, bridge.ErrUnroutable) || time.Now().After(deadline) {
			t.Fatalf("publish from the other host: %v", err)
		}
	}
	r.waitFor(gid, 2)
}

// TestOrphanQueueEmptiedOnReturn: an inbox closed and deleted while the
// broker is unreachable keeps its broker queue, bound, so what another
// host publishes to it meanwhile waits there with nobody to consume it
// (before: until its TTL; its sender heard nothing). When the link
// returns the queue is closed, what waits there goes to the inbox's last
// handler (the core reports it to its sender), and the queue is deleted:
// a later publish to it is unroutable.
func TestOrphanQueueEmptiedOnReturn(t *testing.T) {
	r := newRig(t, split.Options{Bound: 200 * time.Millisecond})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := r.a.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	sub, err := r.a.Consume(ctx, gid, 16, func(d bridge.Delivery) { got <- string(d.Env.Body); _ = d.Acker.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	r.link.LinkDown()
	if _, err := r.a.CloseInbox(ctx, gid); err != nil {
		t.Fatal(err)
	}
	sub.Cancel() // as a removal stops the consumer before it deletes the inbox
	if err := r.a.DeleteInbox(ctx, gid); err != nil {
		t.Fatal(err)
	}
	if err := r.b.Publish(ctx, gid, env("hb", gid, "sent during the outage", time.Minute), true); err != nil {
		t.Fatalf("publishing to the broker queue left bound: %v", err)
	}
	r.link.LinkUp()
	select {
	case body := <-got:
		if body != "sent during the outage" {
			t.Fatalf("the inbox's handler got %q", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("what waited in the removed inbox's broker queue never reached its handler")
	}
	// until the queue is closed a publish still lands there: each that
	// did reaches the handler too
	landed := 0
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := r.b.Publish(ctx, gid, env("hb", gid, "after", time.Minute), true)
		if errors.Is(err, bridge.ErrUnroutable) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("a publish to the removed inbox after the link returned: %v, want ErrUnroutable", err)
		}
		landed++
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < landed; i++ {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d messages that landed in the removed inbox's queue reached its handler", i, landed)
		}
	}
	t.Logf("landed after the link returned, before the queue was closed: %d", landed)
}

// TestFailoverNotSpooled: a send that finds the link lost a moment ago
// waits the failover grace for it instead of spooling; the link back
// within it, the send goes straight to the broker and the outbox stays
// empty — so later sends do not queue behind a pump that publishes one
// at a time (the cluster's rolling restart: confirms stopped for 18 s
// after a 70 ms failover). Each loss gets a grace of its own; past it,
// sends spool.
func TestFailoverNotSpooled(t *testing.T) {
	r := newRig(t, split.Options{Bound: time.Minute, FailoverGrace: 2 * time.Second})
	remote := r.inbox(r.b)
	for round := range 2 {
		r.link.LinkDown()
		time.AfterFunc(100*time.Millisecond, r.link.LinkUp)
		body := fmt.Sprintf("failover-%d", round)
		if err := r.publish(remote, body); err != nil {
			t.Fatalf("round %d: publish across a 100 ms failover: %v, want it published", round, err)
		}
		if n, _ := r.a.Outbox(); n != 0 {
			t.Fatalf("round %d: outbox holds %d, want 0", round, n)
		}
		r.waitFor(remote, round+1)
	}
	r.link.LinkDown()
	start := time.Now()
	if err := r.publish(remote, "outage"); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("publish with the link down past the grace: %v, want ErrSpooled", err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("spooled after %v, before the grace ended", d)
	}
	start = time.Now()
	if err := r.publish(remote, "outage-2"); !errors.Is(err, bridge.ErrSpooled) {
		t.Fatalf("second publish in the outage: %v, want ErrSpooled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a send in a known outage waited %v", d)
	}
	r.link.LinkUp()
	r.waitFor(remote, 4)
}
