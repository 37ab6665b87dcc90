package broker

import (
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// The queue types of the inboxes, control and dead-letter queues. Classic
// is one broker node's queue; quorum is RabbitMQ's replicated queue, the
// only one left since 4.0. x-queue-type never changes on an existing
// queue (PRECONDITION_FAILED), so each type has its own names and a
// gateway that changes type migrates (migrate.go).
const (
	QueueTypeAuto    = "auto"
	QueueTypeClassic = "classic"
	QueueTypeQuorum  = "quorum"
)

// The quorum type's own dead-letter pair: bridge.dlq is classic, and a
// queue's dead-letter exchange is fixed at declare.
const (
	ExchangeDLXQuorum = "bridge.dlx.v3"
	QueueDLQQuorum    = "bridge.dlq.v3"
)

// DeliveryLimit is the x-delivery-limit of quorum inboxes and control
// queues: how often a message may go back to its queue (a gateway that
// died or lost its connection holding it unacked) before the broker
// dead-letters it. RabbitMQ 4.0 defaults it to 20, which a host whose
// gateway restarts often while an entity sits on a full prefetch window
// could reach with a healthy message; 100 still ends a message that kills
// every gateway that takes it, and it is set explicitly so the behaviour
// is the same on 3.x (no limit by default) and 4.x.
const DeliveryLimit = 100

// ParseQueueType checks a configured queue type: "" is auto.
func ParseQueueType(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", QueueTypeAuto:
		return QueueTypeAuto, nil
	case QueueTypeClassic:
		return QueueTypeClassic, nil
	case QueueTypeQuorum:
		return QueueTypeQuorum, nil
	}
	return "", fmt.Errorf("queue type %q: use auto, classic or quorum", s)
}

// InboxQueue is gid's inbox on a broker whose inboxes are of type qtype.
func InboxQueue(gid, qtype string) string {
	if qtype == QueueTypeQuorum {
		return "agent." + gid + ".inbox.v3"
	}
	return bridge.InboxQueueName(gid)
}

// ControlQueueOf is host's control queue for queue type qtype.
func ControlQueueOf(host, qtype string) string {
	if qtype == QueueTypeQuorum {
		return ControlQueue(host) + ".v3"
	}
	return ControlQueue(host)
}

// dlxOf is the dead-letter exchange the queues of qtype name.
func dlxOf(qtype string) string {
	if qtype == QueueTypeQuorum {
		return ExchangeDLXQuorum
	}
	return ExchangeDLX
}

// otherType is the type a migration comes from.
func otherType(qtype string) string {
	if qtype == QueueTypeQuorum {
		return QueueTypeClassic
	}
	return QueueTypeQuorum
}

// quorumArgs are the arguments every quorum inbox and control queue has:
// one consumer at a time (the exclusive flag of basic.consume is ignored
// on quorum queues), a full queue refuses the publish (quorum has no
// reject-publish-dlx: the transport writes the dead letter itself), and
// dead letters are at-least-once (which needs reject-publish) with the
// delivery limit explicit.
func quorumArgs() amqp.Table {
	return amqp.Table{
		"x-queue-type":             QueueTypeQuorum,
		"x-single-active-consumer": true,
		"x-overflow":               OverflowRejectPublish,
		"x-dead-letter-exchange":   ExchangeDLXQuorum,
		"x-dead-letter-strategy":   "at-least-once",
		"x-delivery-limit":         int64(DeliveryLimit),
	}
}

// controlArgs are the arguments of a control queue of qtype.
func controlArgs(qtype string) amqp.Table {
	if qtype == QueueTypeQuorum {
		return quorumArgs()
	}
	return amqp.Table{"x-dead-letter-exchange": ExchangeDLX}
}

// Transport's queue type, fixed at Open.
func (t *Transport) queueType() string { return t.qtype }

// InboxQueue is the broker name of gid's inbox on this transport: the
// name its dead-letter reports give.
func (t *Transport) InboxQueue(gid string) string { return InboxQueue(gid, t.qtype) }

// QueueType is the type of this transport's inboxes, control and
// dead-letter queues.
func (t *Transport) QueueType() string { return t.qtype }

// quorumMaxLength is the x-max-length that caps a quorum inbox at n: a
// quorum queue refuses publishes only once it is over its limit (it took
// one message past it: checked on RabbitMQ 3.10.8, one publisher waiting
// for each confirm), so it is declared one less. Its limit is also
// asynchronous — publishes pipelined into a full queue are accepted until
// the queue has told the channel it is full (50 pipelined into a cap of 3
// were all taken) — so on quorum the cap holds for a steady sender and is
// overshot by a burst (README "Queue types"). 0 would be no limit: a cap
// of 1 stays 1.
func quorumMaxLength(n int) int64 {
	return int64(max(n-1, 1))
}
