package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// deadLeaderBound is how soon the first publishes of a channel to a
// quorum inbox whose leader's node was just killed must be confirmed:
// one quorumRotateAfter to give up on the channel, a new election, and
// room for a loaded CI machine. RabbitMQ 3.10.8 nacked such a channel for
// 5-6 s with raw AMQP and for 17-44 s under the gateway's traffic.
const deadLeaderBound = 4 * time.Second

// TestFirstPublishesAfterLeaderKilled (cluster): a transport on node 2
// publishes for the first time to a quorum inbox at the moment its
// leader's node (1) is kill -9ed. Its channel picks the dead leader and
// the queue nacks it below its cap; the transport moves to a new channel
// and every publish is confirmed within deadLeaderBound, each once.
// Fails without the channel rotation (pubrotate.go): the publishes stay
// refused past the bound.
func TestFirstPublishesAfterLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker node")
	}
	c := brokertest.ClusterOf(t)
	c.Repair(t)
	t.Cleanup(func() { c.Repair(t) })
	ctx := context.Background()
	gid := uuid.NewString()
	spec := bridge.InboxSpec{MaxLength: 10000}
	owner := openNodes(t, Options{URLs: []string{c.URLs[0]}, inOrder: true, QueueType: QueueTypeQuorum, Heartbeat: 2 * time.Second})
	if err := owner.DeclareInbox(ctx, gid, spec); err != nil { // declared on node 1: its leader there
		t.Fatal(err)
	}
	tr := openNodes(t, Options{URLs: []string{c.URLs[1]}, inOrder: true, QueueType: QueueTypeQuorum, Heartbeat: 2 * time.Second})
	if err := tr.DeclareInbox(ctx, gid, spec); err != nil {
		t.Fatal(err)
	}
	if leader := queueLeader(t, c, 2, tr.InboxQueue(gid)); leader != c.NodeName(1) {
		t.Fatalf("the inbox's leader is %q, want node 1 (%s)", leader, c.NodeName(1))
	}
	c.KillNow(t, 1)
	start := time.Now()
	const n = 8
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			errs[i] = tr.Publish(pctx, gid, testEnvelope(gid, i), true)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	c.Kill(t, 1) // reaps it
	t.Logf("first publishes after the leader's node was killed: confirmed after %v (channel replaced %d times)", took, tr.Counts().Rotations)
	for i := range n {
		if errs[i] != nil {
			t.Errorf("publish %d: %v", i, errs[i])
		} else if took[i] > deadLeaderBound {
			t.Errorf("publish %d confirmed after %v, bound %v", i, took[i].Round(time.Millisecond), deadLeaderBound)
		}
	}
	delivered := countDeliveries(t, tr, gid)
	waitUntil(t, 20*time.Second, "every publish delivered", func() bool { return len(delivered()) == n })
	time.Sleep(300 * time.Millisecond) // a copy would come now
	for id, k := range delivered() {
		if k != 1 {
			t.Errorf("%s delivered %d times", id, k)
		}
	}
}

// queueLeader is quorum queue q's leader as node n of c lists it.
func queueLeader(t *testing.T, c *brokertest.Cluster, n int, q string) string {
	t.Helper()
	for _, line := range strings.Split(c.Ctl(t, n, "list_queues", "name", "leader", "--no-table-headers"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == q {
			return f[1]
		}
	}
	return ""
}
