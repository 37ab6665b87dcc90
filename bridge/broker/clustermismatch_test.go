package broker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// TestReconnectToAnotherClusterIsLoud: a broker URI list whose nodes are
// not one cluster (a misconfiguration: the queues, and what they hold,
// are per cluster) is said out loud when the transport reconnects to a
// node of another cluster: an ERROR in the log and the mismatch in Link
// (stats, doctor). The other cluster is the test broker renamed while the
// connection is cut, with the transport's inbox deleted: a node of
// another cluster holds none of its queues. Fails before clustercheck.go:
// the reconnect was one INFO "broker connected" line.
func TestReconnectToAnotherClusterIsLoud(t *testing.T) {
	l, logs := reconnectRenamed(t, true)
	if !strings.Contains(l.ClusterMismatch, "-other") {
		t.Errorf("Link().ClusterMismatch = %q, want both cluster names", l.ClusterMismatch)
	}
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "another cluster") {
		t.Errorf("no ERROR about another cluster in the log:\n%s", logs)
	}
}

// TestRenamedNodeHoldingOurQueuesIsOneCluster: RabbitMQ names each node's
// cluster after the node unless set_cluster_name was run (the three nodes
// of CI's cluster answered three names), so a node under another name
// that holds the transport's queues is the same cluster: no alarm. Failed
// before holdsOurQueue: every failover in a default cluster was an ERROR.
func TestRenamedNodeHoldingOurQueuesIsOneCluster(t *testing.T) {
	l, logs := reconnectRenamed(t, false)
	if l.ClusterMismatch != "" || strings.Contains(logs, "another cluster") {
		t.Fatalf("a mismatch for a node that holds our queues: %q\n%s", l.ClusterMismatch, logs)
	}
}

// reconnectRenamed renames the test broker's cluster while the
// transport's connection is cut (deleting its inbox first when gone),
// waits for the reconnect, and returns the Link and the log.
func reconnectRenamed(t *testing.T, gone bool) (broker.Link, string) {
	p, url := brokertest.NewProxy(t, brokerURL(t))
	var logs lockedBuffer
	tr, err := broker.Open(context.Background(), broker.Options{URL: url, Heartbeat: 2 * time.Second, QueueType: broker.QueueTypeClassic,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	first := tr.Link().ClusterName
	if first == "" {
		t.Fatal("the test broker reports no cluster_name")
	}
	t.Cleanup(func() { brokertest.Ctl(t, "set_cluster_name", first) })
	if tr.Link().ClusterMismatch != "" {
		t.Fatalf("a mismatch before any reconnect: %q", tr.Link().ClusterMismatch)
	}
	brokertest.Ctl(t, "set_cluster_name", first+"-other")
	if gone {
		ch, err := rawConn(t).Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(tr.InboxQueue(gid), false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	p.Cut()
	deadline := time.Now().Add(15 * time.Second)
	for tr.Link().ClusterName != first+"-other" || !tr.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected to the renamed broker: %+v", tr.Link())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return tr.Link(), logs.String()
}
