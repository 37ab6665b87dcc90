package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

// openCluster opens a transport on every node of the test cluster
// (RMQ_CLUSTER_URLS, .ci/rmq.sh rmq_cluster_start) with quorum queues.
func openCluster(t testing.TB, c *brokertest.Cluster) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URLs: c.URLs, Heartbeat: 2 * time.Second, QueueType: broker.QueueTypeQuorum})
	if err != nil {
		t.Fatal(err)
	}
	if tr.QueueType() != broker.QueueTypeQuorum {
		t.Fatalf("queue type %s on the cluster", tr.QueueType())
	}
	return tr
}

// TestConformanceCluster: the cluster suite — every transport promise on
// the 3-node cluster with quorum inboxes, each transport dialling the
// nodes in its own shuffled order, so a publisher, its peer and the
// queue's leader are on different nodes as often as not.
func TestConformanceCluster(t *testing.T) {
	c := brokertest.ClusterOf(t)
	open := func(t *testing.T) bridge.Transport { return openCluster(t, c) }
	transporttest.Run(t, transporttest.Factory{
		New:           open,
		Reopen:        func(t *testing.T, old bridge.Transport) bridge.Transport { old.Close(); return open(t) },
		Peer:          func(t *testing.T, _ bridge.Transport) bridge.Transport { return open(t) },
		Timeout:       15 * time.Second,
		Grace:         800 * time.Millisecond,
		InboxQueue:    func(gid string) string { return broker.InboxQueue(gid, broker.QueueTypeQuorum) },
		ControlQueue:  func(host string) string { return broker.ControlQueueOf(host, broker.QueueTypeQuorum) },
		SingleActive:  true,
		SoftMaxLength: true,
	})
}
