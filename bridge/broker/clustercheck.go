package broker

import (
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

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
// older RabbitMQ) is not compared. A name is not proof: RabbitMQ names
// each node's cluster after the node itself unless someone ran
// set_cluster_name (3.10.8: the three nodes of one cluster answered
// three names), so a node under another name that holds a queue this
// transport declared is of the same cluster.
func (t *Transport) checkCluster(si ServerInfo, conn *amqp.Connection) {
	if si.ClusterName == "" {
		return
	}
	t.mu.Lock()
	if t.firstCluster == "" {
		t.firstCluster = si.ClusterName
	}
	first := t.firstCluster
	t.mu.Unlock()
	if first == si.ClusterName {
		return
	}
	if t.holdsOurQueue(conn) {
		t.log.Debug("broker node reports another cluster name but holds this gateway's queues: one cluster", "node", si.Node, "cluster", si.ClusterName, "firstCluster", first)
		return
	}
	t.mu.Lock()
	if t.clusterMismatch == "" {
		t.clusterMismatch = fmt.Sprintf("node %s is in cluster %q, not %q where this gateway first connected: its broker URIs name more than one cluster, and what waits in the other cluster's queues is stranded there", si.Node, si.ClusterName, first)
	}
	t.mu.Unlock()
	t.log.Error("broker reconnected to another cluster: every --broker URI must name a node of one cluster",
		"node", si.Node, "cluster", si.ClusterName, "firstCluster", first)
}

// holdsOurQueue reports whether conn's broker has a queue this transport
// declared before (one of its inboxes, else the dead-letter queue): the
// one membership test AMQP allows. A durable classic queue whose home
// node is down answers 404 "home node … is down": it exists.
func (t *Transport) holdsOurQueue(conn *amqp.Connection) bool {
	q := QueueDLQ
	t.mu.Lock()
	for gid := range t.inboxes {
		q = InboxQueue(gid, t.qtype)
		break
	}
	t.mu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return true // cannot tell: no alarm on a guess
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	var ae *amqp.Error
	switch {
	case err == nil:
		return true
	case errors.As(err, &ae) && ae.Code == amqp.NotFound:
		return strings.Contains(ae.Reason, "home node")
	}
	return true
}
