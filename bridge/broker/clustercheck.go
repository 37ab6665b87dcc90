package broker

import "fmt"

// Every URI of a broker list must name a node of one cluster: queues, and
// the messages they hold, live in their cluster. A list that mixes two
// brokers (a second single node taken for a standby, a typo) fails over
// to a broker that has none of the first one's queues: what waits there
// is stranded until the transport goes back, and hosts that stayed on the
// first broker no longer reach this one's inboxes. AMQP gives nothing to
// refuse such a node with — a fresh node declares every queue again
// without complaint — so the transport says it, loudly and for good: an
// ERROR at each such reconnect and a mismatch in Link (stats, doctor)
// until the gateway restarts.

// checkCluster compares the cluster_name of a new connection with the
// first one this transport had. A broker that reports none (LavinMQ,
// older RabbitMQ) is not compared.
func (t *Transport) checkCluster(si ServerInfo) {
	if si.ClusterName == "" {
		return
	}
	t.mu.Lock()
	if t.firstCluster == "" {
		t.firstCluster = si.ClusterName
	}
	first := t.firstCluster
	if first != si.ClusterName && t.clusterMismatch == "" {
		t.clusterMismatch = fmt.Sprintf("node %s is in cluster %q, not %q where this gateway first connected: its broker URIs name more than one cluster, and what waits in the other cluster's queues is stranded there", si.Node, si.ClusterName, first)
	}
	t.mu.Unlock()
	if first != si.ClusterName {
		t.log.Error("broker reconnected to another cluster: every --broker URI must name a node of one cluster",
			"node", si.Node, "cluster", si.ClusterName, "firstCluster", first)
	}
}
