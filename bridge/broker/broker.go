// Package broker is the cross-host transport: per-entity inboxes on an AMQP
// 0-9-1 broker (RabbitMQ or LavinMQ), with the topology of SPEC §5. It owns
// one connection to one of the broker's nodes (nodes.go) — re-dialled,
// on another node when there is one, after a loss, with the whole
// topology re-declared and every consumer re-attached — a separate publish
// channel with publisher confirms, mandatory routing and a return listener,
// and one manual-ack channel per consumer. It uses only what both brokers
// have; amqp091-go's experimental Config.Recovery is left off: this
// package's own loop recovers, and the fault tests prove it.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.Transport = (*Transport)(nil)

// Exchange and queue names (SPEC §5).
const (
	ExchangeMsg     = "bridge.msg"
	ExchangeRoster  = "bridge.roster"
	ExchangeControl = "bridge.control"
	ExchangeDLX     = "bridge.dlx"
	QueueDLQ        = "bridge.dlq"
)

// Options configure a Transport.
type Options struct {
	// URL is one broker node; URLs are several (a cluster, a standby),
	// tried in a shuffled order, the connection moving to another node when
	// it is lost (nodes.go). URLs wins when both are set.
	URL       string
	URLs      []string
	TLS       *tls.Config
	Heartbeat time.Duration // default 10s: an exclusive consumer of a crashed gateway is released quickly
	DLQMax    int           // cap of bridge.dlq (default 10000)
	Logger    *slog.Logger
	// ConnectTimeout bounds the first dial (default 10s).
	ConnectTimeout time.Duration
	// DownWait bounds how long a publish waits for a broker that is down
	// before it fails with bridge.ErrUnavailable (default 5s): a send never
	// hangs until the MCP client gives up.
	DownWait time.Duration
	// Overflow forces the x-overflow of the inboxes (OverflowRejectPublish
	// or OverflowRejectPublishDLX); empty: chosen by the broker's product
	// at connect (overflow.go).
	Overflow string
	// QueueType is the type of the inboxes, control and dead-letter
	// queues: classic or quorum (queuetype.go). "" and auto are classic
	// here: the gateway resolves auto (DecideQueueType) before Open. On
	// LavinMQ, which has no quorum queues, it is classic whatever is set.
	QueueType string
	// ConfirmTimeout bounds how long a publish waits for its confirm while
	// the connection is up (default 10s). A node cut off from its cluster's
	// majority keeps the TCP connection but never confirms a quorum
	// publish: past the bound the connection is closed, the supervisor
	// moves to another node and the publish goes again (same msgId).
	ConfirmTimeout time.Duration
	// inOrder dials the nodes in the order given, not shuffled (tests).
	inOrder bool
}

// Transport is the AMQP transport. Create it with Open.
type Transport struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	conn      *amqp.Connection
	pub       *amqp.Channel
	returns   chan amqp.Return
	returned  map[string]time.Time // msgIds the broker returned unroutable
	up        chan struct{}        // closed while connected
	inboxes   map[string]bridge.InboxSpec
	bound     map[string]map[string]bool // gid -> routing keys bound by this process
	consumers map[*consumer]bool
	closed    bool
	stop      chan struct{}
	wg        sync.WaitGroup
	pubMu     sync.Mutex         // publishes and the returns drain
	pubErr    *amqp.Error        // why the broker last closed the publish channel (a channel exception)
	rotate    chan *amqp.Channel // the current connection's requests to replace its publish channel (pubrotate.go)
	retired   []chan amqp.Return // returns of replaced publish channels still open: wasReturned drains them too
	nacks     nackRuns           // quorum inboxes nacking below their cap (pubrotate.go)
	counts    counters           // for metrics (Counts)
	server    ServerInfo         // what the broker of the current connection is (overflow.go)
	delay     delayCell          // whether bridge.delay is usable (delay.go)
	qtype     string             // classic or quorum: set by Open's first connect, fixed after it
	blocked   atomic.Bool        // the broker holds the current connection's publishes (connection.blocked)
	urls      []string           // the broker nodes (nodes.go)
	node      string             // the URL of the node connected to, or last connected to
	// firstCluster is the cluster_name of the first connection that
	// reported one; clusterMismatch the first reconnect to another
	// (clustercheck.go).
	firstCluster, clusterMismatch string
}

// Open dials the broker, declares the shared topology and starts the
// connection's supervisor.
func Open(ctx context.Context, opts Options) (*Transport, error) {
	urls := nodeURLs(opts)
	if err := CheckURLs(urls, opts.TLS); err != nil {
		return nil, err
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = 10 * time.Second
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 10 * time.Second
	}
	if opts.DLQMax <= 0 {
		opts.DLQMax = 10000
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.DownWait <= 0 {
		opts.DownWait = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if opts.Overflow, err = ParseOverflow(opts.Overflow); err != nil {
		return nil, err
	}
	qtype, err := ParseQueueType(opts.QueueType)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if qtype == QueueTypeAuto {
		qtype = QueueTypeClassic
	}
	t := &Transport{opts: opts, log: opts.Logger, up: make(chan struct{}), returned: map[string]time.Time{},
		inboxes: map[string]bridge.InboxSpec{}, bound: map[string]map[string]bool{}, consumers: map[*consumer]bool{},
		stop: make(chan struct{}), qtype: qtype, urls: urls}
	dctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	closed, err := t.connect(dctx)
	if err != nil {
		return nil, err
	}
	t.wg.Add(1)
	go t.supervise(closed)
	return t, nil
}

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}

// connect runs one round of dials over the nodes (dialOrder), the node
// last connected to tried last, and connects to the first that answers and
// takes the topology. A failed node hands over to the next at once; each
// gets an equal share of what is left of ctx, so one that hangs cannot eat
// the others' time.
func (t *Transport) connect(ctx context.Context) (chan *amqp.Error, error) {
	t.mu.Lock()
	last := t.node
	t.mu.Unlock()
	order := dialOrder(t.urls, last, !t.opts.inOrder)
	var errs []error
	for i, u := range order {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			nctx, cancel = context.WithTimeout(ctx, time.Until(dl)/time.Duration(len(order)-i))
		}
		closed, err := t.connectNode(nctx, u)
		cancel()
		if err == nil {
			return closed, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("broker: none of the %d nodes took the connection: %w", len(order), errors.Join(errs...))
}

// connectNode dials one node and sets up the shared topology and the
// publish channel.
func (t *Transport) connectNode(ctx context.Context, url string) (chan *amqp.Error, error) {
	cfg := amqp.Config{Heartbeat: t.opts.Heartbeat, TLSClientConfig: nodeTLS(t.opts.TLS, url, len(t.urls)), Locale: "en_US",
		Properties: amqp.Table{"connection_name": "herdbridge gateway"}}
	conn, err := dial(ctx, url, cfg, t.opts.TLS)
	if err != nil {
		return nil, err
	}
	si := t.serverOf(conn)
	si.Node = nodeName(url)
	t.mu.Lock()
	changed := si != t.server
	t.server = si // before any inbox is declared on this connection
	t.mu.Unlock()
	t.checkCluster(si, conn)
	if changed {
		t.log.Info("broker connected", "node", si.Node, "cluster", si.ClusterName, "product", si.Product, "version", si.Version, "inboxOverflow", si.Overflow, "queueType", t.qtype)
	}
	if err := t.declareShared(conn); err != nil {
		conn.Close()
		return nil, err
	}
	pub, returns, pubClosed, err := openPublish(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	t.blocked.Store(false)
	rotate := make(chan *amqp.Channel, 1)
	t.wg.Add(2)
	go t.watchPublish(conn, pubClosed, rotate)
	go t.watchBlocked(conn.NotifyBlocked(make(chan amqp.Blocking, 4)))
	t.mu.Lock()
	t.conn, t.pub, t.returns, t.node, t.rotate, t.retired = conn, pub, returns, url, rotate, nil
	specs := make(map[string]bridge.InboxSpec, len(t.inboxes))
	for gid, s := range t.inboxes {
		specs[gid] = s
	}
	t.mu.Unlock()
	for gid, spec := range specs { // after a reconnect: the whole topology again
		if err := t.declareInbox(gid, spec); err != nil {
			t.log.Error("re-declaring an inbox after reconnect failed", "queue", t.InboxQueue(gid), "err", err)
		}
	}
	t.mu.Lock()
	close(t.up)
	t.mu.Unlock()
	t.probeDelayLater(url, cfg) // bridge.delay, on a connection of its own (delay.go)
	return closed, nil
}

// openPublish opens the publish channel: confirms, returns, close notice.
func openPublish(conn *amqp.Connection) (*amqp.Channel, chan amqp.Return, chan *amqp.Error, error) {
	pub, err := conn.Channel()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("broker: open publish channel: %w", err)
	}
	if err := pub.Confirm(false); err != nil {
		pub.Close()
		return nil, nil, nil, fmt.Errorf("broker: publisher confirms: %w", err)
	}
	returns := pub.NotifyReturn(make(chan amqp.Return, 4096))
	closed := pub.NotifyClose(make(chan *amqp.Error, 1))
	return pub, returns, closed, nil
}

// watchPublish reopens the publish channel when the broker closes it with
// a channel exception while the connection stays up (a refused publish: a
// permission, a deleted exchange). Without it every publish would find the
// channel closed and spin until its deadline. A connection loss is the
// supervisor's. It also replaces a channel a quorum inbox keeps nacking
// when asked (rotate, pubrotate.go): one goroutine owns the channel's
// lifecycle.
func (t *Transport) watchPublish(conn *amqp.Connection, closed chan *amqp.Error, rotate chan *amqp.Channel) {
	defer t.wg.Done()
	for {
		var e *amqp.Error
		var ok bool
		select {
		case e, ok = <-closed:
		case old := <-rotate:
			c, ok := t.rotatePublish(conn, old)
			if !ok {
				return
			}
			if c != nil {
				closed = c
			}
			continue
		case <-t.stop:
			return
		}
		if !ok || e == nil || conn.IsClosed() {
			return
		}
		t.log.Warn("broker closed the publish channel; reopening it", "err", e.Error())
		pub, returns, c, err := openPublish(conn)
		if err != nil {
			t.log.Warn("reopening the publish channel failed; reconnecting", "err", err)
			conn.Close() // the supervisor takes it from here
			return
		}
		t.mu.Lock()
		if t.conn == conn {
			t.pub, t.returns, t.pubErr = pub, returns, e
		}
		t.mu.Unlock()
		closed = c
	}
}

// watchBlocked follows connection.blocked/unblocked: RabbitMQ holds every
// publish while a resource alarm (memory, disk) lasts — on every node of
// a cluster alike — so a confirm that does not come then is no reason to
// move to another node (waitConfirm). The channel closes with the
// connection.
func (t *Transport) watchBlocked(blockings chan amqp.Blocking) {
	defer t.wg.Done()
	for b := range blockings {
		t.blocked.Store(b.Active)
		if b.Active {
			t.log.Warn("broker blocks publishing (a resource alarm); publishes wait", "node", t.Server().Node, "reason", b.Reason)
		} else {
			t.log.Info("broker unblocked publishing", "node", t.Server().Node)
		}
	}
}

// declareShared declares the exchanges and the dead-letter queues: the
// classic pair always (classic gateways feed it during a rolling
// upgrade), the quorum pair too on quorum.
func (t *Transport) declareShared(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	for _, x := range topologyOf(t.qtype) {
		if err := ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil); err != nil {
			return declareErr("exchange", x.name, err)
		}
	}
	for _, dlq := range dlqsOf(t.qtype, t.opts.DLQMax) {
		err := declareDLQ(ch, dlq)
		if err == nil {
			continue
		}
		if !t.legacyDLQDown(dlq, err) {
			return err
		}
		if ch, err = conn.Channel(); err != nil { // the 404 closed the channel
			return fmt.Errorf("broker: open channel: %w", err)
		}
		defer ch.Close()
	}
	return nil
}

func declareDLQ(ch *amqp.Channel, dlq dlq) error {
	if _, err := ch.QueueDeclare(dlq.name, true, false, false, false, dlq.args); err != nil {
		return declareErr("queue", dlq.name, err)
	}
	if err := ch.QueueBind(dlq.name, "", dlq.dlx, false, nil); err != nil {
		return declareErr("binding of", dlq.name, err)
	}
	return nil
}

// legacyDLQDown reports (and logs) a quorum gateway's declare of the
// classic bridge.dlq refused with NOT_FOUND: the queue exists but lives on
// one node, which is down (a declare never answers 404 otherwise). Only
// classic gateways of a rolling upgrade feed it, so the connection goes on
// without it — its consumer re-attaches once the node is back — rather
// than every node refusing the gateway until that one returns.
func (t *Transport) legacyDLQDown(d dlq, err error) bool {
	var ae *amqp.Error
	if t.qtype != QueueTypeQuorum || d.name != QueueDLQ || !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return false
	}
	t.log.Warn("the classic dead-letter queue is unavailable (its node is down); connecting without it", "queue", d.name, "err", ae.Reason)
	return true
}

// declareErr turns PRECONDITION_FAILED into an error that names the entity
// and the differing argument, and says what to do.
func declareErr(what, name string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
		return accessErr("declare "+what, name, ae)
	}
	if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
		return fmt.Errorf("broker: %s %s exists with other arguments (%s): delete it (rabbitmqctl delete_queue / delete_exchange) or align the configuration; refusing to start", what, name, ae.Reason)
	}
	return fmt.Errorf("broker: declare %s %s: %w", what, name, err)
}

// supervise re-dials after a lost connection, until Close: a round over
// the nodes (connect), then a jittered backoff, again (nodes.go). A
// recovery on another node is logged as a failover.
func (t *Transport) supervise(closed chan *amqp.Error) {
	defer t.wg.Done()
	for {
		select {
		case <-t.stop:
			return
		case e, ok := <-closed:
			t.mu.Lock()
			if t.closed {
				t.mu.Unlock()
				return
			}
			t.up = make(chan struct{}) // consumers and publishers wait on this
			from := t.server.Node
			t.mu.Unlock()
			if ok && e != nil {
				t.log.Warn("broker connection lost; reconnecting", "node", from, "err", e.Error())
			} else {
				t.log.Warn("broker connection closed; reconnecting", "node", from)
			}
			if closed = t.reconnect(from); closed == nil {
				return // closed meanwhile
			}
		}
	}
}

// reconnect dials rounds until one connects (its close notice) or the
// transport closes (nil).
func (t *Transport) reconnect(from string) chan *amqp.Error {
	start := time.Now()
	for round := 0; ; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.ConnectTimeout)
		c, err := t.connect(ctx)
		cancel()
		if err == nil {
			to := t.Server().Node
			t.log.Info("broker connection recovered", "node", to, "seconds", time.Since(start).Seconds())
			if to != from {
				t.log.Warn("broker failover", "from", from, "to", to, "seconds", time.Since(start).Seconds())
			}
			t.counts.reconnects.Add(1)
			return c
		}
		wait := roundBackoff(round)
		t.log.Warn("broker reconnect failed", "err", err, "retryIn", wait)
		select {
		case <-t.stop:
			return nil
		case <-time.After(wait):
		}
	}
}

// nodesText names the broker nodes for an error, credentials redacted.
func (t *Transport) nodesText() string {
	names := make([]string, len(t.urls))
	for i, u := range t.urls {
		names[i] = redact(u)
	}
	return strings.Join(names, ", ")
}

// waitUp waits until connected; the generation's channels are returned.
func (t *Transport) waitUp(ctx context.Context) (*amqp.Connection, *amqp.Channel, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, nil, bridge.ErrClosed
		}
		up, conn, pub := t.up, t.conn, t.pub
		t.mu.Unlock()
		select {
		case <-up:
			if conn != nil && !conn.IsClosed() {
				return conn, pub, nil
			}
			select { // closed under us: the supervisor will replace up
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("broker: not connected: %w", ctx.Err())
		case <-t.stop:
			return nil, nil, bridge.ErrClosed
		}
	}
}

// Connected reports whether the connection is up right now. A false is
// a broker known to be unreachable: a caller with somewhere else to put a
// message (the split transport's outbox) need not wait DownWait for it.
func (t *Transport) Connected() bool {
	t.mu.Lock()
	up, conn, closed := t.up, t.conn, t.closed
	t.mu.Unlock()
	if closed || conn == nil || conn.IsClosed() {
		return false
	}
	select {
	case <-up:
		return true
	default:
		return false
	}
}

// waitUpToPublish is waitUp bounded by DownWait: past it, the broker is
// reported unreachable (bridge.ErrUnavailable) instead of waited for.
func (t *Transport) waitUpToPublish(ctx context.Context) (*amqp.Connection, *amqp.Channel, error) {
	wctx, cancel := context.WithTimeout(ctx, t.opts.DownWait)
	defer cancel()
	conn, pub, err := t.waitUp(wctx)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, nil, fmt.Errorf("%w: the broker at %s has been unreachable for %v (the gateway keeps reconnecting)", bridge.ErrUnavailable, t.nodesText(), t.opts.DownWait)
	}
	return conn, pub, err
}

// Close stops consumers and closes the connection. Idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	var cons []*consumer
	for c := range t.consumers {
		cons = append(cons, c)
	}
	conn := t.conn
	t.mu.Unlock()
	for _, c := range cons {
		c.Cancel()
	}
	if conn != nil {
		conn.Close()
	}
	t.wg.Wait()
	return nil
}
