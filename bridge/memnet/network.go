// Package memnet is an in-memory network of gateways: what the AMQP broker
// is to gateways on different hosts, in one process. A Network holds the
// broker's observable state — durable per-entity inboxes bound on
// bridge.msg, the per-host roster queues on bridge.roster, the per-host
// control queues on bridge.control, and bridge.dlx → bridge.dlq — and each
// gateway Connects to it and gets a Transport (bridge.Transport,
// bridge.PresenceTransport and bridge.ControlTransport).
//
// Envelopes cross it as they cross a broker: encoded to headers and body
// by the publisher and decoded by the consumer (bridge.FromHeaders), so
// signatures and malformed input take the same paths as on the wire.
// Delivery is asynchronous: a publish enqueues and returns; each consumer
// has one goroutine that calls its handler, owned by the subscription and
// stopped by Cancel or by its Transport's Close.
//
// It exists for tests: many bridge cores in one process, cross-host
// semantics in milliseconds, no broker. It passes the same conformance
// suite as the broker (bridge/transporttest). Faults a test needs are
// explicit: Transport.LinkDown/LinkUp (a lost and recovered connection)
// and Network.Inject (a raw publish by anyone with broker access).
//
// It imports only bridge; it knows nothing of entities, keys or cores.
package memnet

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Exchange is where a raw publish goes (SPEC §5).
type Exchange string

// The exchanges and the dead-letter queue of SPEC §5.
const (
	ExchangeMsg     Exchange = "bridge.msg"     // topic: gid, broadcast.all, broadcast.<group>
	ExchangeRoster  Exchange = "bridge.roster"  // topic: roster.<host>, every roster queue bound with roster.#
	ExchangeControl Exchange = "bridge.control" // direct: host id
	ExchangeDLX     Exchange = "bridge.dlx"     // fanout: bridge.dlq
	QueueDLQ                 = "bridge.dlq"
)

// RosterQueue is host's presence queue: exclusive to one connection and
// deleted with it (or with its last consumer), as on the broker.
func RosterQueue(host string) string { return "roster." + host }

// ControlQueue is host's durable control queue.
func ControlQueue(host string) string { return "control." + host }

// Dead-letter headers, as RabbitMQ writes them.
const (
	hdrDeathReason = "x-first-death-reason"
	hdrDeathQueue  = "x-first-death-queue"
)

// Options configure a Network.
type Options struct {
	DLQMax int // cap of bridge.dlq; past it the oldest is dropped (default 10000)
	// Delay gives the network the delay exchange (bridge.delay, as
	// LavinMQ has natively and RabbitMQ with its plugin): delay.go. Off,
	// as on a stock RabbitMQ, PublishDelayed is refused.
	Delay  bool
	Logger *slog.Logger
}

// Network is the shared state every Transport connects to: the broker.
// The zero value is not usable; create one with New.
type Network struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex // guards everything below, and every queue and consumer
	queues map[string]*queue
	binds  map[Exchange]map[string]map[*queue]bool // exchange -> binding key -> queues
	conns  map[*Transport]bool
	seq    uint64               // message sequence: requeued messages keep their place
	delays map[*time.Timer]bool // delayed publishes not yet due (delay.go)
	delayN int                  // delayed publishes taken, in all
	routed map[Exchange]uint64  // copies enqueued by exchange, in all: deliveries (Routed)
	into   map[string]uint64    // copies enqueued by queue name, in all (RoutedTo)
	closed bool
}

// New returns an empty network with its dead-letter queue. It starts
// nothing.
func New(opts Options) *Network {
	if opts.DLQMax <= 0 {
		opts.DLQMax = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Network{opts: opts, log: opts.Logger, queues: map[string]*queue{},
		binds: map[Exchange]map[string]map[*queue]bool{}, conns: map[*Transport]bool{}}
	dlq := n.declareLocked(QueueDLQ, queueArgs{maxLen: opts.DLQMax, dropHead: true}, nil)
	n.bindLocked(ExchangeDLX, "", dlq)
	return n
}

// Connect opens a gateway's connection: its Transport.
func (n *Network) Connect() *Transport {
	t := &Transport{n: n, consumers: map[*consumer]bool{}, stop: make(chan struct{}), up: make(chan struct{})}
	close(t.up)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		t.closed = true
		close(t.stop)
		return t
	}
	n.conns[t] = true
	return t
}

// Close closes every connection and drops every queue. Idempotent.
func (n *Network) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	conns := make([]*Transport, 0, len(n.conns))
	for t := range n.conns {
		conns = append(conns, t)
	}
	n.mu.Unlock()
	for _, t := range conns {
		_ = t.Close()
	}
	n.mu.Lock()
	for _, q := range n.queues {
		n.dropQueueLocked(q)
	}
	n.stopDelaysLocked()
	n.mu.Unlock()
}

// Inject publishes raw headers and body on ex with key, as anyone with
// access to the broker could: nothing is validated, signed or encoded (a
// test attacker's door). It is not mandatory; routed says how many queues
// took a copy.
func (n *Network) Inject(ex Exchange, key string, headers map[string]any, body []byte) (routed int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return 0, bridge.ErrClosed
	}
	if _, ok := exchangeKinds[ex]; !ok {
		return 0, fmt.Errorf("memnet: no exchange %q", ex)
	}
	routed, _ = n.publishLocked(ex, key, &message{headers: maps.Clone(headers), body: clone(body), key: key})
	return routed, nil
}

// Queues lists the queues that exist now (tests: what was declared).
func (n *Network) Queues() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.queues))
	for name := range n.queues {
		out = append(out, name)
	}
	return out
}

// Depth reports how many messages queue holds ready and how many are
// handed out and not yet settled; ok is false when there is no such queue.
// Tests wait on it to know a message was settled (nothing else shows).
func (n *Network) Depth(queue string) (ready, unacked int, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.queues[queue]
	if q == nil {
		return 0, 0, false
	}
	for _, c := range q.cons {
		unacked += len(c.unacked)
	}
	return len(q.ready), unacked, true
}

var exchangeKinds = map[Exchange]string{ExchangeMsg: "topic", ExchangeRoster: "topic", ExchangeControl: "direct", ExchangeDLX: "fanout"}

// matches is AMQP routing for the bindings this topology uses: a fanout
// takes everything, "prefix.#" takes prefix and everything under it, any
// other binding key matches itself.
func matches(ex Exchange, binding, key string) bool {
	switch {
	case exchangeKinds[ex] == "fanout":
		return true
	case exchangeKinds[ex] == "topic" && strings.HasSuffix(binding, ".#"):
		p := strings.TrimSuffix(binding, "#")
		return key == p[:len(p)-1] || strings.HasPrefix(key, p)
	default:
		return binding == key
	}
}

// routeLocked returns the queues bound to ex that key reaches, each once.
// It runs under the network's one lock for every publish: a key that one
// binding reaches (every heartbeat: roster.# binds every roster queue) is
// routed without the set that takes out duplicates.
func (n *Network) routeLocked(ex Exchange, key string) []*queue {
	binds := n.binds[ex]
	var sets []map[*queue]bool
	if qs := binds[key]; len(qs) > 0 {
		sets = append(sets, qs)
	}
	if exchangeKinds[ex] != "direct" {
		for b, qs := range binds {
			if b != key && matches(ex, b, key) {
				sets = append(sets, qs)
			}
		}
	}
	if len(sets) == 1 {
		out := make([]*queue, 0, len(sets[0]))
		for q := range sets[0] {
			out = append(out, q)
		}
		return out
	}
	var out []*queue
	seen := map[*queue]bool{}
	for _, qs := range sets {
		for q := range qs {
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	return out
}

func (n *Network) bindLocked(ex Exchange, key string, q *queue) {
	if n.binds[ex] == nil {
		n.binds[ex] = map[string]map[*queue]bool{}
	}
	if n.binds[ex][key] == nil {
		n.binds[ex][key] = map[*queue]bool{}
	}
	n.binds[ex][key][q] = true
	q.bound[bindKey{ex, key}] = true
}

func (n *Network) unbindLocked(ex Exchange, key string, q *queue) {
	delete(n.binds[ex][key], q)
	if len(n.binds[ex][key]) == 0 {
		delete(n.binds[ex], key)
	}
	delete(q.bound, bindKey{ex, key})
}

// Routed is how many copies publishes to ex have enqueued since the
// network started: what a broker counts as deliveries (presence cost
// measurements).
func (n *Network) Routed(ex Exchange) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.routed[ex]
}

// RoutedTo is how many copies publishes have enqueued in the queue named
// queue since the network started, across its re-declarations: one host's
// share of the deliveries (the scale simulation counts them per host).
func (n *Network) RoutedTo(queue string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.into[queue]
}

// publishLocked routes m by ex and key and enqueues a copy in every queue
// it reaches. refused counts the copies a full queue dead-lettered.
func (n *Network) publishLocked(ex Exchange, key string, m *message) (routed, refused int) {
	for _, q := range n.routeLocked(ex, key) {
		routed++
		if n.routed == nil {
			n.routed, n.into = map[Exchange]uint64{}, map[string]uint64{}
		}
		n.routed[ex]++
		n.into[q.name]++
		c := *m // the copies share headers and body: nothing changes either in place (a dead letter's are cloned first)
		if !n.enqueueLocked(q, &c) {
			refused++
		}
	}
	return routed, refused
}

// deadLetterLocked sends m, which leaves q for reason, to bridge.dlx. The
// first death is recorded in the headers, as RabbitMQ does; a queue with
// no dead-letter exchange (bridge.dlq itself) drops it.
func (n *Network) deadLetterLocked(q *queue, m *message, reason string) {
	if !q.args.deadLetter {
		return
	}
	d := m.copy()
	if d.headers == nil {
		d.headers = map[string]any{}
	}
	if _, ok := d.headers[hdrDeathReason]; !ok {
		d.headers[hdrDeathReason] = reason
		d.headers[hdrDeathQueue] = q.name
	}
	d.redelivered, d.ttl, d.hasTTL, d.expires = false, 0, false, time.Time{} // RabbitMQ drops the expiration of a dead letter
	n.publishLocked(ExchangeDLX, "", d)
}

// deathOf reads why and from where a dead letter died.
func deathOf(h map[string]any) (reason, queue string) {
	reason, _ = h[hdrDeathReason].(string)
	queue, _ = h[hdrDeathQueue].(string)
	if reason == "" {
		reason = bridge.ReasonRejected
	}
	return reason, queue
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

var errVoid = errors.New("memnet: delivery tag is void: the consumer's channel closed (the message is delivered again)")
