package broker

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// deadURL is an AMQP URL of a port nothing listens on: a node that is down.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "amqp://guest:guest@" + addr + "/"
}

func openNodes(t *testing.T, opts Options) *Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// testEnvelope is a message to gid whose msgId is the UUID tag(i): each
// publish uniquely tagged, to be counted at the receiver.
func testEnvelope(gid string, i int) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: tag(i), From: uuid.NewString(), To: gid, Host: "h",
		TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(tag(i))}
}

func tag(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// TestOpenSkipsADeadNode: with a node that is down among the URIs, in
// either order and shuffled, Open connects to the live one and reports it.
func TestOpenSkipsADeadNode(t *testing.T) {
	live := brokertest.URL(t)
	dead := deadURL(t)
	for _, tc := range []struct {
		name    string
		urls    []string
		inOrder bool
	}{
		{"dead first", []string{dead, live}, true},
		{"live first", []string{live, dead}, true},
		{"shuffled", []string{dead, live}, false},
	} {
		tr := openNodes(t, Options{URLs: tc.urls, inOrder: tc.inOrder})
		s := tr.Server()
		if s.Node != nodeName(live) || s.Product != "RabbitMQ" || s.ClusterName == "" {
			t.Errorf("%s: server %+v, want node %s with its cluster name", tc.name, s, nodeName(live))
		}
		tr.Close()
	}
}

// TestFailoverWhenTheNodeDies: a transport connected to one node (a proxy
// in front of the test broker) moves to the other (the broker directly)
// when the proxy dies mid-traffic; every confirmed publish is received.
// Some may be received twice — a publish whose confirm the dying link took
// goes again with the same msgId, and a delivery unacked at the loss is
// redelivered — which receivers drop by msgId: counted, not failed on.
func TestFailoverWhenTheNodeDies(t *testing.T) {
	live := brokertest.URL(t)
	proxy, viaProxy := brokertest.NewProxy(t, live)
	tr := openNodes(t, Options{URLs: []string{viaProxy, live}, inOrder: true, Heartbeat: 2 * time.Second})
	if n := tr.Server().Node; n != nodeName(viaProxy) {
		t.Fatalf("connected to %s, want the proxy %s first", n, nodeName(viaProxy))
	}
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 100000}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	var mu sync.Mutex
	got := map[string]int{}
	sub, err := tr.Consume(ctx, gid, 64, func(d bridge.Delivery) {
		if d.Env == nil {
			t.Errorf("malformed delivery: %v", d.Err)
			_ = d.Acker.Ack()
			return
		}
		mu.Lock()
		got[d.Env.MsgID]++
		mu.Unlock()
		_ = d.Acker.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	const n, workers = 2000, 8
	var next, confirmed atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= n; i = next.Add(1) {
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := tr.Publish(pctx, gid, testEnvelope(gid, int(i)), true)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				confirmed.Add(1)
			}
		}()
	}
	for confirmed.Load() < n/4 {
		time.Sleep(time.Millisecond)
	}
	killedAt := time.Now()
	proxy.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a publish failed across the failover: %v", err)
	}
	if node := tr.Server().Node; node != nodeName(live) {
		t.Fatalf("after the proxy died: node %s, want %s", node, nodeName(live))
	}
	deadline := time.Now().Add(20 * time.Second)
	distinct, dups := 0, 0
	for time.Now().Before(deadline) {
		mu.Lock()
		distinct, dups = len(got), 0
		for _, c := range got {
			dups += c - 1
		}
		mu.Unlock()
		if distinct >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d confirmed publishes, %d received (distinct msgIds), %d duplicate deliveries (dropped by msgId at receivers); all received %v after the kill; reconnects %d",
		confirmed.Load(), distinct, dups, time.Since(killedAt).Round(time.Millisecond), tr.Counts().Reconnects)
	for i := 1; i <= n; i++ {
		if got[tag(i)] == 0 {
			t.Errorf("%s confirmed, never received", tag(i))
		}
	}
	if distinct != n {
		t.Fatalf("received %d distinct of %d", distinct, n)
	}
}

// TestConfirmStallFailsOver: the node keeps the TCP connection but stops
// answering (a proxy holding what the broker sends, as a node cut off from
// its cluster's majority holds a quorum publish's confirm): the publish
// does not wait for its caller's deadline — past ConfirmTimeout the
// connection is closed, the transport moves to the other node and the
// publish goes again, confirmed there.
func TestConfirmStallFailsOver(t *testing.T) {
	live := brokertest.URL(t)
	proxy, viaProxy := brokertest.NewProxy(t, live)
	// a heartbeat far longer than the test: only the confirm bound can end the stall
	tr := openNodes(t, Options{URLs: []string{viaProxy, live}, inOrder: true, Heartbeat: time.Minute, ConfirmTimeout: time.Second})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	if err := tr.Publish(ctx, gid, testEnvelope(gid, 1), true); err != nil {
		t.Fatal(err)
	}
	proxy.Hold()
	defer proxy.Release()
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := tr.Publish(pctx, gid, testEnvelope(gid, 2), true); err != nil {
		t.Fatalf("publish on a stalled node: %v after %v", err, time.Since(start))
	}
	took := time.Since(start)
	if node := tr.Server().Node; node != nodeName(live) {
		t.Fatalf("after the stall: node %s, want %s", node, nodeName(live))
	}
	t.Logf("confirmed on the other node %v after the stall began (ConfirmTimeout 1s)", took.Round(time.Millisecond))
	if took > 8*time.Second {
		t.Fatalf("took %v", took)
	}
}

// TestBlockedBrokerIsNoStall: a resource alarm (connection.blocked) holds
// publishes on every node of a cluster alike, so a confirm that waits on
// it past ConfirmTimeout does not close the connection: the publish is
// confirmed once the alarm clears, on the same connection. On a private
// broker: the alarm would stall every other test's publishes.
func TestBlockedBrokerIsNoStall(t *testing.T) {
	b := brokertest.StartPrivate(t)
	tr := openNodes(t, Options{URLs: []string{b.URL}, ConfirmTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		t.Fatal(err)
	}
	b.Ctl(t, "set_vm_memory_high_watermark", "0.0000001")
	defer b.Ctl(t, "set_vm_memory_high_watermark", "0.4")
	done := make(chan error, 1)
	go func() { // the publish the alarm holds (it makes the broker send connection.blocked)
		pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		done <- tr.Publish(pctx, gid, testEnvelope(gid, 2), true)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !tr.blocked.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the broker never said it blocks publishing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(5 * 300 * time.Millisecond) // five confirm bounds, blocked
	select {
	case err := <-done:
		t.Fatalf("the publish ended while the broker was blocked: %v", err)
	default:
	}
	b.Ctl(t, "set_vm_memory_high_watermark", "0.4")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := tr.Counts().Reconnects; n != 0 {
		t.Fatalf("%d reconnects while the broker was blocked, want 0", n)
	}
}
