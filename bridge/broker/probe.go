package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// topology is what every gateway declares at connect and needs to be
// there: the shared exchanges and the dead-letter queue.
var topology = []struct{ name, kind string }{
	{ExchangeMsg, amqp.ExchangeTopic}, {ExchangeRoster, amqp.ExchangeTopic},
	{ExchangeControl, amqp.ExchangeDirect}, {ExchangeDLX, amqp.ExchangeFanout},
}

// topologyOf is the exchanges a gateway of qtype declares.
func topologyOf(qtype string) []struct{ name, kind string } {
	if qtype != QueueTypeQuorum {
		return topology
	}
	return append(append([]struct{ name, kind string }{}, topology...), struct{ name, kind string }{ExchangeDLXQuorum, amqp.ExchangeFanout})
}

// dlq is one dead-letter queue and the exchange that feeds it.
type dlq struct {
	name, dlx string
	args      amqp.Table
}

// dlqsOf is the dead-letter queues a gateway of qtype declares and
// consumes: bridge.dlq, and on quorum bridge.dlq.v3 (quorum, capped,
// the oldest dropped past the cap as on bridge.dlq).
func dlqsOf(qtype string, max int) []dlq {
	out := []dlq{{QueueDLQ, ExchangeDLX, amqp.Table{"x-max-length": int64(max)}}}
	if qtype == QueueTypeQuorum {
		out = append(out, dlq{QueueDLQQuorum, ExchangeDLXQuorum, amqp.Table{"x-queue-type": QueueTypeQuorum, "x-max-length": int64(max), "x-overflow": "drop-head"}})
	}
	return out
}

// CheckTopology reports whether the shared exchanges and the dead-letter
// queue exist (`herdbridge doctor`), declaring nothing: a passive declare
// on a channel of its own, which the broker closes at the first missing
// one.
func (t *Transport) CheckTopology(ctx context.Context) error {
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	return checkTopology(conn, t.qtype)
}

func checkTopology(conn *amqp.Connection, qtype string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	for _, x := range topologyOf(qtype) {
		if err := ch.ExchangeDeclarePassive(x.name, x.kind, true, false, false, false, nil); err != nil {
			return topologyErr("exchange", x.name, err)
		}
	}
	for _, q := range dlqsOf(qtype, 0) {
		if _, err := ch.QueueDeclarePassive(q.name, true, false, false, false, nil); err != nil {
			return topologyErr("queue", q.name, err)
		}
	}
	return nil
}

// topologyErr says what is missing or refused, and what to do.
func topologyErr(what, name string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return fmt.Errorf("broker: %s %s is missing: (re)start a gateway on this broker, it declares the topology", what, name)
	}
	if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
		return accessErr("check "+what, name, ae)
	}
	return fmt.Errorf("broker: check %s %s: %w", what, name, err)
}

// Probe connects to the broker at url, checks the topology and hangs up:
// `herdbridge doctor` when no gateway runs.
func Probe(ctx context.Context, url string, tlsConf *tls.Config) error {
	if err := checkTLS(Options{URL: url, TLS: tlsConf}); err != nil {
		return err
	}
	conn, err := dial(ctx, url, amqp.Config{TLSClientConfig: tlsConf.Clone(), Locale: "en_US",
		Properties: amqp.Table{"connection_name": "herdbridge doctor"}}, tlsConf)
	if err != nil {
		return err
	}
	defer conn.Close()
	return checkTopology(conn, QueueTypeClassic)
}
