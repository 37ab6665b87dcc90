package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// TestNackRuns: a run opens on an inbox's first below-cap nack, asks for
// a new channel once it has lasted quorumRotateAfter (then restarts), and
// ends on that inbox's confirm; another inbox's confirm does not end it.
func TestNackRuns(t *testing.T) {
	var r nackRuns
	t0 := time.Now()
	if r.nacked("a", t0) {
		t.Fatal("the first nack asked for a new channel")
	}
	if r.nacked("a", t0.Add(quorumRotateAfter/2)) {
		t.Fatal("half a run asked for a new channel")
	}
	r.confirmed("b")
	if !r.nacked("a", t0.Add(quorumRotateAfter)) {
		t.Fatal("a run of quorumRotateAfter (another inbox confirmed meanwhile) did not ask for a new channel")
	}
	if r.nacked("a", t0.Add(quorumRotateAfter+time.Millisecond)) {
		t.Fatal("a run that just asked asked again at once")
	}
	r.confirmed("a")
	if r.open.Load() != 0 {
		t.Fatalf("open runs after the confirm: %d", r.open.Load())
	}
	if r.nacked("a", t0.Add(3*quorumRotateAfter)) {
		t.Fatal("a confirm did not end the run")
	}
	for i := range 2 * maxNackRuns {
		r.nacked(fmt.Sprint("k", i), t0)
	}
	if n := len(r.since); n > maxNackRuns {
		t.Fatalf("%d runs followed, cap %d", n, maxNackRuns)
	}
}

// TestNackingChannelReplaced: a quorum inbox that nacks below the inbox
// cap (held here by a max-length policy of 1, as a dead leader would)
// gets its publish channel replaced after quorumRotateAfter; the publish
// that was being refused is confirmed once the queue takes it again, a
// mandatory publish to no queue during the switch is still reported
// unroutable, and nothing else published meanwhile is lost or reported
// refused.
func TestNackingChannelReplaced(t *testing.T) {
	tr := openNodes(t, Options{URL: brokertest.URL(t), QueueType: QueueTypeQuorum, Heartbeat: 2 * time.Second})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 10000}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.DeleteInbox(context.Background(), gid) })
	policy := "hb-rotate-" + gid[:8]
	brokertest.Ctl(t, "set_policy", "--apply-to", "queues", policy, "^"+tr.InboxQueue(gid)+"$", `{"max-length":1}`)
	cleared := false
	t.Cleanup(func() {
		if !cleared {
			brokertest.Ctl(t, "clear_policy", policy)
		}
	})
	time.Sleep(500 * time.Millisecond) // the policy reaches the queue
	for i := range 2 {                 // a quorum queue takes one past its limit
		if err := tr.Publish(ctx, gid, testEnvelope(gid, i), true); err != nil {
			t.Fatalf("publish %d below the limit: %v", i, err)
		}
	}
	tr.mu.Lock()
	first := tr.pub
	tr.mu.Unlock()
	refused := make(chan error, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		refused <- tr.Publish(pctx, gid, testEnvelope(gid, 2), true)
	}()
	waitUntil(t, 10*time.Second, "the publish channel replaced", func() bool { return tr.Counts().Rotations > 0 })
	tr.mu.Lock()
	second := tr.pub
	tr.mu.Unlock()
	if second == first {
		t.Fatal("Rotations counted, but the publish channel is the same")
	}
	if err := tr.Publish(ctx, "no-such-inbox-"+gid, testEnvelope(gid, 3), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Fatalf("a mandatory publish to no queue after the switch: %v, want ErrUnroutable", err)
	}
	brokertest.Ctl(t, "clear_policy", policy)
	cleared = true
	if err := <-refused; err != nil {
		t.Fatalf("the refused publish, once the queue takes it again: %v", err)
	}
	if n := tr.nacks.open.Load(); n != 0 {
		t.Fatalf("%d nack runs still open after the confirm", n)
	}
	delivered := countDeliveries(t, tr, gid)
	waitUntil(t, 10*time.Second, "the three messages delivered", func() bool { return len(delivered()) == 3 })
}

// countDeliveries consumes gid's inbox for the rest of the test, acking
// each delivery; what it returns reads the count per msgId so far.
func countDeliveries(t *testing.T, tr *Transport, gid string) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	c, err := tr.Consume(context.Background(), gid, 16, func(d bridge.Delivery) {
		if d.Env != nil {
			mu.Lock()
			got[d.Env.MsgID]++
			mu.Unlock()
		}
		_ = d.Acker.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cancel)
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(got))
		for k, v := range got {
			out[k] = v
		}
		return out
	}
}

// waitUntil polls cond every 20 ms until it holds, failing after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}
