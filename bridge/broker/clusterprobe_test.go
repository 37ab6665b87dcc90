package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// TestAutoFindsTheCluster: auto chooses quorum on a real 3-node cluster
// whose nodes were never given one name (each answers its own
// cluster_name on RabbitMQ 3.10.8), because the probe tells a cluster by
// the exclusive queue its first node declares; and a list that adds a
// separate broker does not count it in. Failed before sameCluster: three
// names, so auto chose classic on every default cluster.
func TestAutoFindsTheCluster(t *testing.T) {
	c := brokertest.ClusterOf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	answers := broker.ProbeNodes(ctx, c.URLs, nil)
	choice := broker.DecideQueueType(broker.QueueTypeAuto, "", c.URLs, answers)
	if choice.Type != broker.QueueTypeQuorum {
		t.Fatalf("auto on a 3-node cluster: %+v (answers %+v), want quorum", choice, answers)
	}
	mixed := []string{c.URLs[0], c.URLs[1], brokerURL(t)} // two nodes of the cluster and a single node
	answers = broker.ProbeNodes(ctx, mixed, nil)
	if answers[2].ClusterName == answers[0].ClusterName {
		t.Fatalf("a separate broker counted as the cluster: %+v", answers)
	}
	if choice := broker.DecideQueueType(broker.QueueTypeAuto, "", mixed, answers); choice.Type != broker.QueueTypeClassic || !strings.Contains(choice.Why, "different cluster names") {
		t.Fatalf("auto over two cluster nodes and a separate broker: %+v, want classic, saying the names differ", choice)
	}
}
