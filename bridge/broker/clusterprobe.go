package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ProbeNodes dials every distinct URI at once, reads the product and the
// cluster_name connection.start carries, gives the nodes of one cluster
// one name (sameCluster), and hangs up: what auto decides
// the queue type on (DecideQueueType). A node that does not answer
// within ctx is an answer with Err set.
func ProbeNodes(ctx context.Context, urls []string, tlsConf *tls.Config) []NodeAnswer {
	urls = distinct(urls)
	out := make([]NodeAnswer, len(urls))
	conns := make([]*amqp.Connection, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], conns[i] = probeNode(ctx, u, tlsConf)
		}()
	}
	wg.Wait()
	sameCluster(out, conns)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	return out
}

// sameCluster gives the nodes that are one cluster one cluster name.
// RabbitMQ names each node's cluster after the node itself unless
// set_cluster_name was run (3.10.8: CI's three joined nodes answered
// three names), so the name alone would never find a cluster. The test:
// an exclusive queue declared on the first node is visible, and locked
// (405 RESOURCE_LOCKED), from every node of its cluster, and unknown
// (404) on any other broker. It is deleted with the probe's connection.
func sameCluster(answers []NodeAnswer, conns []*amqp.Connection) {
	anchor := -1
	for i, c := range conns {
		if c != nil {
			anchor = i
			break
		}
	}
	if anchor < 0 {
		return
	}
	ch, err := conns[anchor].Channel()
	if err != nil {
		return
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return
	}
	for i, c := range conns {
		if i == anchor || c == nil {
			continue
		}
		if locked(c, q.Name) {
			answers[i].ClusterName = answers[anchor].ClusterName
		} else if answers[i].ClusterName == answers[anchor].ClusterName {
			answers[i].ClusterName += " (another broker of that name)"
		}
	}
}

// locked reports whether q exists on conn's broker, held by another
// connection.
func locked(conn *amqp.Connection, q string) bool {
	ch, err := conn.Channel()
	if err != nil {
		return false
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(q, false, true, true, false, nil)
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.ResourceLocked
}

func probeNode(ctx context.Context, url string, tlsConf *tls.Config) (NodeAnswer, *amqp.Connection) {
	conn, err := dial(ctx, url, amqp.Config{TLSClientConfig: tlsConf.Clone(), Locale: "en_US",
		Properties: amqp.Table{"connection_name": "herdbridge queue-type probe"}}, tlsConf)
	if err != nil {
		return NodeAnswer{URL: url, Err: err}, nil
	}
	return NodeAnswer{URL: url, Product: propText(conn.Properties["product"]), ClusterName: propText(conn.Properties["cluster_name"])}, conn
}
