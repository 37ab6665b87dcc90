// Package split is the transport of a gateway on a broker. It composes two
// transports behind bridge.Transport: the embedded one (a file in the
// gateway's state directory) carries every message between entities of
// this host, and the broker carries what crosses hosts. So a broker outage
// stops only cross-host traffic, and that is bounded too: a message for
// another host that cannot be published within Options.Bound is kept in the
// embedded store's outbox and published, in order, when the broker returns
// (Publish returns bridge.ErrSpooled), or — with Outage set to Fail — the
// publish fails within the bound with bridge.ErrUnavailable.
//
// Every local inbox is declared on both sides: the broker copy is where
// other hosts publish to it (and where a backlog from before this gateway
// used the split transport waits), the local copy is where this host
// publishes to it. Its consumer reads both, one handler call at a time.
// A broadcast goes to the local inboxes bound to its key and to the
// broker; the broker copies that come back to this host's inboxes are
// acked and skipped (their local copy already arrived).
//
// Presence and control are the broker's alone: they only matter across
// hosts.
package split

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// Remote is the cross-host transport: the broker (bridge/broker), or the
// in-memory network in tests.
type Remote interface {
	bridge.Transport
	bridge.PresenceTransport
	bridge.ControlTransport
	// Connected reports whether the link is up now; false lets a publish
	// spool at once instead of waiting Bound for a broker known to be down.
	Connected() bool
}

// Mode is what a cross-host publish does when the broker is unreachable.
type Mode string

const (
	// Spool keeps the message in the outbox and publishes it when the
	// broker returns (the default).
	Spool Mode = "spool"
	// Fail fails the publish within Bound, saying the broker is down.
	Fail Mode = "fail"
)

// ParseMode reads a Mode ("" is Spool).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", Spool:
		return Spool, nil
	case Fail:
		return Fail, nil
	}
	return "", fmt.Errorf("broker outage mode %q: use spool or fail", s)
}

// Options tune a Transport.
type Options struct {
	// Host is this gateway's host id (required): broadcasts of this host
	// that come back through the broker are skipped.
	Host   string
	Outage Mode // default Spool
	// Bound is how long a cross-host publish may wait for the broker
	// before it is spooled or fails (default 5s).
	Bound time.Duration
	// OutboxMaxMessages and OutboxMaxBytes cap the outbox (defaults
	// 100000 and 256 MiB); a message over either is refused, saying so.
	OutboxMaxMessages int
	OutboxMaxBytes    int64
	// RetryEvery is how often the outbox pump looks for the broker again
	// after a failed publish (default 250ms).
	RetryEvery time.Duration
	// FailoverGrace is how long a send that finds the link just lost
	// waits for it to come back before it is spooled (default 1s, at most
	// Bound): a broker node failing over is back well within it
	// (failover.go). Past it, sends spool at once until the link returns.
	FailoverGrace time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
}

// Transport is the split transport. Create it with New; Start starts the
// outbox pump.
type Transport struct {
	local  *embedded.Transport
	remote Remote
	opts   Options
	log    *slog.Logger

	mu            sync.Mutex
	spooled       int       // messages in the outbox, or about to be
	downSince     time.Time // when a send first found the link down (failover.go)
	started       bool
	closed        bool
	undeliverable func(env *bridge.Envelope, reason string)
	wake          chan struct{}
	stop          chan struct{}
	wg            sync.WaitGroup

	// attach.go: the broker side of inboxes declared or consumed while
	// the broker was unreachable, done when it returns
	amu       sync.Mutex
	declares  map[string]bridge.InboxSpec
	attaches  map[*inboxSub]bool
	attaching bool
	attachWG  sync.WaitGroup
	// orphan.go: the last handler of each inbox consumed here, and the
	// broker sides of inboxes closed or deleted during an outage
	handlers map[string]func(bridge.Delivery)
	orphans  map[string]func(bridge.Delivery)
}

var (
	_ bridge.Transport         = (*Transport)(nil)
	_ bridge.PresenceTransport = (*Transport)(nil)
	_ bridge.ControlTransport  = (*Transport)(nil)
)

// New composes local and remote. The Transport owns both: Close closes them.
func New(local *embedded.Transport, remote Remote, opts Options) (*Transport, error) {
	if opts.Host == "" {
		return nil, errors.New("split: Options.Host is required")
	}
	mode, err := ParseMode(string(opts.Outage))
	if err != nil {
		return nil, err
	}
	opts.Outage = mode
	if opts.Bound <= 0 {
		opts.Bound = 5 * time.Second
	}
	if opts.OutboxMaxMessages <= 0 {
		opts.OutboxMaxMessages = 100000
	}
	if opts.OutboxMaxBytes <= 0 {
		opts.OutboxMaxBytes = 256 << 20
	}
	if opts.FailoverGrace <= 0 {
		opts.FailoverGrace = min(defaultFailoverGrace, opts.Bound)
	}
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = 250 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := &Transport{local: local, remote: remote, opts: opts, log: opts.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
		declares: map[string]bridge.InboxSpec{}, attaches: map[*inboxSub]bool{},
		handlers: map[string]func(bridge.Delivery){}, orphans: map[string]func(bridge.Delivery){}}
	t.spooled, _ = local.OutboxLen()
	return t, nil
}

// Start starts the outbox pump. undeliverable (may be nil) is told about
// every spooled message that can no longer be delivered — it expired in
// the outbox, or the broker refused it once back (no such inbox, inbox
// full) — so its sender can be told: the sender was answered "queued".
func (t *Transport) Start(undeliverable func(env *bridge.Envelope, reason string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.closed {
		return
	}
	t.started, t.undeliverable = true, undeliverable
	if t.spooled > 0 {
		t.log.Warn("messages for other hosts wait in this gateway's outbox from before a restart; publishing them", "messages", t.spooled)
	}
	t.wg.Add(1)
	go t.pump()
}

// Outbox is how many messages and bytes wait in the outbox. The count is
// the one that decides whether a publish queues behind them (it includes
// a message being written, and one the pump removed but has not yet
// counted out), so an empty outbox means the next publish goes straight
// to the broker.
func (t *Transport) Outbox() (messages int, bytes int64) {
	n, bytes := t.local.OutboxLen()
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(n, t.spooled), bytes
}

// DeclareInbox implements bridge.Transport: on both sides. With the
// broker unreachable the local inbox is enough to go on: the broker's is
// declared when it returns (attach.go), so an entity registers, and talks
// to its own host, during an outage.
func (t *Transport) DeclareInbox(ctx context.Context, gid string, spec bridge.InboxSpec) error {
	if err := t.local.DeclareInbox(ctx, gid, spec); err != nil {
		return err
	}
	if t.remote.Connected() {
		err := t.bounded(ctx, func(ctx context.Context) error { return t.remote.DeclareInbox(ctx, gid, spec) })
		if !t.down(ctx, err) {
			return err
		}
	}
	t.later(gid, &spec, nil)
	return nil
}

// DeleteInbox implements bridge.Transport: on both sides. The broker's
// queue of an inbox deleted during an outage is left to its x-expires.
func (t *Transport) DeleteInbox(ctx context.Context, gid string) error {
	t.forget(gid)
	lerr := t.local.DeleteInbox(ctx, gid)
	if t.isOrphan(gid) { // closed during the outage: the attacher empties it first
		t.forgetHandler(gid)
		return lerr
	}
	rerr := t.bounded(ctx, func(ctx context.Context) error { return t.remote.DeleteInbox(ctx, gid) })
	if t.down(ctx, rerr) {
		t.log.Warn("broker unreachable: the broker queue of a deleted inbox is closed, emptied and deleted when the broker returns", "queue", t.InboxQueue(gid), "err", rerr)
		t.orphan(gid)
		rerr = nil
	}
	t.forgetHandler(gid)
	return errors.Join(lerr, rerr)
}

func (t *Transport) forgetHandler(gid string) {
	t.amu.Lock()
	defer t.amu.Unlock()
	delete(t.handlers, gid)
}

// CloseInbox implements bridge.Transport: on both sides. With the broker
// unreachable only the local side is closed and counted: the broker's
// queue is left to its TTL and x-expires, as DeleteInbox leaves it (what
// expires there is dead-lettered and reported from the dead-letter queue).
func (t *Transport) CloseInbox(ctx context.Context, gid string) (int, error) {
	n, err := t.local.CloseInbox(ctx, gid)
	if err != nil {
		return n, err
	}
	var r int
	rerr := t.bounded(ctx, func(ctx context.Context) (err error) { r, err = t.remote.CloseInbox(ctx, gid); return err })
	if t.down(ctx, rerr) {
		t.log.Warn("broker unreachable: the broker queue of a closing inbox is closed, emptied and deleted when the broker returns", "queue", t.InboxQueue(gid), "err", rerr)
		t.orphan(gid)
		return n, nil
	}
	return n + r, rerr
}

// bounded runs f under Bound.
func (t *Transport) bounded(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Bound)
	defer cancel()
	return f(ctx)
}

// down reports whether err (of a call bounded under ctx) means the broker
// is unreachable rather than a refusal.
func (t *Transport) down(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && (errors.Is(err, bridge.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) || !t.remote.Connected())
}

// Publish implements bridge.Transport. A point-to-point message for an
// inbox of this host never touches the broker.
func (t *Transport) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	if t.isClosed() {
		return bridge.ErrClosed
	}
	if bridge.IsBroadcastKey(key) {
		return t.broadcast(ctx, key, env, mandatory)
	}
	if t.local.HasInbox(key) {
		return t.local.Publish(ctx, key, env, mandatory)
	}
	return t.cross(ctx, key, env, mandatory)
}

// broadcast publishes to this host's inboxes bound to key, then to the
// broker for the others. Mandatory: unroutable only when neither routes it.
func (t *Transport) broadcast(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	lerr := t.local.Publish(ctx, key, env, true)
	if lerr != nil && !errors.Is(lerr, bridge.ErrUnroutable) {
		return lerr
	}
	routedHere := lerr == nil
	err := t.cross(ctx, key, env, mandatory && !routedHere)
	switch {
	case err == nil, errors.Is(err, bridge.ErrSpooled):
		return err
	case errors.Is(err, bridge.ErrUnroutable) && (routedHere || !mandatory):
		return nil
	case routedHere:
		return fmt.Errorf("delivered to this host's inboxes, not to other hosts: %w", err)
	}
	return err
}

// cross publishes a message for other hosts on the broker, bounded by
// Bound; while the outbox holds anything, or the broker is known to be
// down, it goes to the outbox instead (in Spool mode), so it is published
// after what was accepted before it.
func (t *Transport) cross(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	spool := t.spools(env)
	if spool {
		if t.outboxEmpty() && !t.remote.Connected() {
			t.awaitFailover(ctx)
		}
		t.mu.Lock()
		if t.spooled > 0 || !t.remote.Connected() {
			t.spooled++ // reserved: later publishes queue behind this one
			t.mu.Unlock()
			return t.spool(key, env, mandatory)
		}
		t.downSince = time.Time{} // the link is up: its next loss gets a grace of its own
		t.mu.Unlock()
	}
	pctx, cancel := context.WithTimeout(ctx, t.opts.Bound)
	err := t.remote.Publish(pctx, key, env, mandatory)
	timedOut := pctx.Err() != nil && ctx.Err() == nil
	cancel()
	// a failure while the link is down is the outage, whatever its error
	if err == nil || !(errors.Is(err, bridge.ErrUnavailable) || timedOut || (ctx.Err() == nil && !t.remote.Connected())) {
		return err
	}
	if !spool {
		if errors.Is(err, bridge.ErrUnavailable) {
			return fmt.Errorf("%w (broker outage mode %s: nothing is kept for later)", err, Fail)
		}
		return fmt.Errorf("%w: the broker is unreachable or did not confirm the message within %v: not sent, unless it was published just before the link dropped (broker outage mode %s: nothing is kept for later)", bridge.ErrUnavailable, t.opts.Bound, Fail)
	}
	t.mu.Lock()
	t.spooled++
	t.mu.Unlock()
	return t.spool(key, env, mandatory)
}

// spools reports whether env is kept in the outbox when the broker cannot
// take it now: always in Spool mode, and in Fail mode for a notice or
// receipt (bridge.IsNotice). Fail mode exists so a caller hears at once
// that its message did not go; a notice has no caller to hear it — its
// publisher only logs the failure — so failing it would lose the FAILED or
// INJECTED its addressee is waiting for. Kept, it goes out when the link
// returns and the receiving gateway drops a copy by msgId like any other.
func (t *Transport) spools(env *bridge.Envelope) bool {
	return t.opts.Outage == Spool || bridge.IsNotice(env.Kind)
}

// spool writes env to the outbox; the caller counted it in t.spooled.
func (t *Transport) spool(key string, env *bridge.Envelope, mandatory bool) error {
	err := t.local.Spool(key, env, mandatory, t.opts.OutboxMaxMessages, t.opts.OutboxMaxBytes)
	t.mu.Lock()
	if err != nil {
		t.spooled--
	}
	n := t.spooled
	t.mu.Unlock()
	if errors.Is(err, embedded.ErrOutboxFull) {
		t.log.Warn("broker unreachable and the outbox is full: a message for another host is refused", bridge.LogMsgID, env.MsgID, bridge.LogTraceID, env.TraceID, "to", key, "err", err)
		return fmt.Errorf("%w: not sent: the broker is unreachable and this gateway's outbox for other hosts is full (%v)", bridge.ErrUnavailable, err)
	}
	if err != nil {
		return fmt.Errorf("split: spool %s: %w", env.MsgID, err)
	}
	if n == 1 {
		t.log.Warn("broker unreachable: messages for other hosts are kept in this gateway's outbox until it returns", bridge.LogMsgID, env.MsgID, bridge.LogTraceID, env.TraceID)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w (%d waiting in this gateway's outbox)", bridge.ErrSpooled, n)
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Consume implements bridge.Transport: the inbox's local and broker
// copies, one handler call at a time.
func (t *Transport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	var mu sync.Mutex
	one := func(d bridge.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		h(d)
	}
	ls, err := t.local.Consume(ctx, gid, prefetch, one)
	if err != nil {
		return nil, err
	}
	s := &inboxSub{t: t, gid: gid, prefetch: prefetch, local: ls, h: func(d bridge.Delivery) {
		if t.ownBroadcast(d) {
			_ = d.Acker.Ack()
			return
		}
		one(d)
	}}
	t.amu.Lock()
	t.handlers[gid] = s.h // an orphan's broker queue is emptied with it (orphan.go)
	t.amu.Unlock()
	if t.declaredRemote(gid) && t.remote.Connected() {
		var rs bridge.Subscription
		err := t.bounded(ctx, func(ctx context.Context) (err error) {
			rs, err = t.remote.Consume(ctx, gid, prefetch, s.h)
			return err
		})
		if err == nil {
			s.remote = rs
			return s, nil
		}
		if !t.down(ctx, err) {
			ls.Cancel()
			return nil, err
		}
	}
	t.later(gid, nil, s)
	return s, nil
}

// ownBroadcast is a broadcast of this host come back through the broker:
// its local copy was delivered when it was published. A point-to-point
// message from this host on the broker is not skipped: it was published
// there before this gateway used the split transport.
func (t *Transport) ownBroadcast(d bridge.Delivery) bool {
	return d.Env != nil && d.Env.Host == t.opts.Host && bridge.IsBroadcastKey(d.Key)
}

// ConsumeDeadLetters implements bridge.Transport: both dead-letter
// queues, one handler call at a time.
func (t *Transport) ConsumeDeadLetters(ctx context.Context, h func(bridge.DeadLetter)) (bridge.Subscription, error) {
	var mu sync.Mutex
	one := func(d bridge.DeadLetter) {
		mu.Lock()
		defer mu.Unlock()
		h(d)
	}
	ls, err := t.local.ConsumeDeadLetters(ctx, one)
	if err != nil {
		return nil, err
	}
	rs, err := t.remote.ConsumeDeadLetters(ctx, one)
	if err != nil {
		ls.Cancel()
		return nil, err
	}
	return &both{a: rs, b: ls}, nil
}

// PublishPresence implements bridge.PresenceTransport on the broker. A
// heartbeat is soft state: with the broker known to be down it fails at
// once rather than hold the heartbeat loop for a bound per entity.
func (t *Transport) PublishPresence(ctx context.Context, env *bridge.Envelope) error {
	if !t.remote.Connected() {
		return fmt.Errorf("%w: heartbeat not published: the broker is unreachable", bridge.ErrUnavailable)
	}
	return t.remote.PublishPresence(ctx, env)
}

// ConsumePresence implements bridge.PresenceTransport on the broker.
func (t *Transport) ConsumePresence(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	return t.remote.ConsumePresence(ctx, host, h)
}

// PublishControl implements bridge.ControlTransport on the broker.
func (t *Transport) PublishControl(ctx context.Context, host string, env *bridge.Envelope) error {
	return t.remote.PublishControl(ctx, host, env)
}

// ConsumeControl implements bridge.ControlTransport on the broker.
func (t *Transport) ConsumeControl(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	return t.remote.ConsumeControl(ctx, host, h)
}

// Close stops the pump and closes both transports. What the outbox holds
// stays there for the next start. Idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	t.mu.Unlock()
	t.wg.Wait()
	t.attachWG.Wait()
	return errors.Join(t.remote.Close(), t.local.Close())
}

// both is a subscription on both sides.
type both struct{ a, b bridge.Subscription }

func (s *both) Cancel() {
	s.a.Cancel()
	s.b.Cancel()
}
