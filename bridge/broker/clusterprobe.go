package broker

import (
	"context"
	"crypto/tls"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ProbeNodes dials every distinct URI at once, reads the product and the
// cluster_name connection.start carries, and hangs up: what auto decides
// the queue type on (DecideQueueType). A node that does not answer
// within ctx is an answer with Err set.
func ProbeNodes(ctx context.Context, urls []string, tlsConf *tls.Config) []NodeAnswer {
	urls = distinct(urls)
	out := make([]NodeAnswer, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = probeNode(ctx, u, tlsConf)
		}()
	}
	wg.Wait()
	return out
}

func probeNode(ctx context.Context, url string, tlsConf *tls.Config) NodeAnswer {
	type res struct {
		c   *amqp.Connection
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := amqp.DialConfig(url, amqp.Config{TLSClientConfig: tlsConf.Clone(), Locale: "en_US",
			Properties: amqp.Table{"connection_name": "herdbridge queue-type probe"}})
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return NodeAnswer{URL: url, Err: r.err}
		}
		defer r.c.Close()
		return NodeAnswer{URL: url, Product: propText(r.c.Properties["product"]), ClusterName: propText(r.c.Properties["cluster_name"])}
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return NodeAnswer{URL: url, Err: ctx.Err()}
	}
}
