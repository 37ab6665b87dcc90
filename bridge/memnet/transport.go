package memnet

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var (
	_ bridge.Transport         = (*Transport)(nil)
	_ bridge.PresenceTransport = (*Transport)(nil)
	_ bridge.ControlTransport  = (*Transport)(nil)
)

// Transport is one gateway's connection to a Network. Create it with
// Network.Connect.
type Transport struct {
	n *Network

	// under n.mu
	consumers map[*consumer]bool
	closed    bool
	down      bool          // LinkDown: publishes and declares wait, consumers are detached
	up        chan struct{} // closed while the link is up
	stop      chan struct{} // closed by Close
}

// Network is the network t is connected to.
func (t *Transport) Network() *Network { return t.n }

// do runs f under the network's lock once the link is up; ErrClosed after
// Close. While the link is down it waits, as the broker transport waits
// for its reconnect, until ctx ends.
func (t *Transport) do(ctx context.Context, f func() error) error {
	for {
		t.n.mu.Lock()
		if t.closed {
			t.n.mu.Unlock()
			return bridge.ErrClosed
		}
		if !t.down {
			err := f()
			t.n.mu.Unlock()
			return err
		}
		up := t.up
		t.n.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return fmt.Errorf("memnet: link down: %w", ctx.Err())
		case <-t.stop:
			return bridge.ErrClosed
		}
	}
}

// DeclareInbox implements bridge.Transport. The inbox's arguments are
// fixed when it is first declared; declaring it again with other ones is
// refused, as the broker refuses it. x-expires is recorded, not enforced:
// no test outlives a week.
func (t *Transport) DeclareInbox(ctx context.Context, gid string, spec bridge.InboxSpec) error {
	name := bridge.InboxQueueName(gid)
	args := queueArgs{maxLen: spec.MaxLength, ttl: spec.MessageTTL, expires: spec.Expires, deadLetter: true}
	want := map[string]bool{gid: true, bridge.BroadcastAll: true}
	for _, g := range spec.Groups {
		want[bridge.BroadcastKey(g)] = true
	}
	return t.do(ctx, func() error {
		q := t.n.queues[name]
		if q == nil {
			q = t.n.declareLocked(name, args, nil)
		} else if q.args != args {
			return fmt.Errorf("memnet: queue %s exists with other arguments (%+v, not %+v): refusing to redeclare it", name, q.args, args)
		}
		for b := range q.bound {
			if b.ex == ExchangeMsg && !want[b.key] {
				t.n.unbindLocked(b.ex, b.key, q)
			}
		}
		for key := range want {
			t.n.bindLocked(ExchangeMsg, key, q)
		}
		return nil
	})
}

// DeleteInbox implements bridge.Transport: the queue goes with its
// bindings and contents; its consumers (whoever's) are cancelled.
func (t *Transport) DeleteInbox(ctx context.Context, gid string) error {
	var cons []*consumer
	err := t.do(ctx, func() error {
		if q := t.n.queues[bridge.InboxQueueName(gid)]; q != nil {
			cons = append(cons, q.cons...)
			t.n.dropQueueLocked(q)
		}
		return nil
	})
	for _, c := range cons {
		c.Cancel()
	}
	return err
}

// Publish implements bridge.Transport: the envelope is encoded to headers
// and body, routed on bridge.msg and enqueued in every inbox it reaches
// before Publish returns.
func (t *Transport) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	m := &message{headers: env.Headers(), body: clone(env.Body), key: key, id: env.MsgID}
	var routed, refused int
	if err := t.do(ctx, func() error {
		routed, refused = t.n.publishLocked(ExchangeMsg, key, m)
		return nil
	}); err != nil {
		return err
	}
	switch {
	case routed == 0 && mandatory:
		return fmt.Errorf("%w: %s", bridge.ErrUnroutable, key)
	case refused > 0 && !bridge.IsBroadcastKey(key):
		return fmt.Errorf("%w: %s refused the message", bridge.ErrInboxFull, bridge.InboxQueueName(key))
	}
	return nil // a full inbox refused its copy of a broadcast: dead-lettered
}

// Consume implements bridge.Transport: one exclusive consumer.
func (t *Transport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	c := t.newConsumer(bridge.InboxQueueName(gid), prefetch, true)
	c.deliver = func(m message, a bridge.Acker) { h(delivery(m, a)) }
	return t.start(ctx, c, func() error {
		if t.n.queues[c.queue] == nil {
			return fmt.Errorf("%w: %s", bridge.ErrNoInbox, gid)
		}
		return nil
	})
}

// delivery decodes m as a consumer on the far side of a broker would.
func delivery(m message, a bridge.Acker) bridge.Delivery {
	d := bridge.Delivery{Key: m.key, Redelivered: m.redelivered, ID: m.id, Acker: a}
	d.Env, d.Err = bridge.FromHeaders(maps.Clone(m.headers), clone(m.body))
	return d
}

// ConsumeDeadLetters implements bridge.Transport. As on the broker, every
// gateway consumes the one shared bridge.dlq: each dead letter reaches one
// of them.
func (t *Transport) ConsumeDeadLetters(ctx context.Context, h func(bridge.DeadLetter)) (bridge.Subscription, error) {
	c := t.newConsumer(QueueDLQ, 64, false)
	c.deliver = func(m message, a bridge.Acker) {
		dl := bridge.DeadLetter{MsgID: m.id, At: time.Now(), Acker: a}
		dl.Reason, dl.Queue = deathOf(m.headers)
		if env, err := bridge.FromHeaders(maps.Clone(m.headers), clone(m.body)); err == nil {
			dl.Env = env
		}
		h(dl)
	}
	return t.start(ctx, c, nil)
}

// PublishPresence implements bridge.PresenceTransport: to every roster
// queue, with the heartbeat's lifetime as its expiration.
func (t *Transport) PublishPresence(ctx context.Context, env *bridge.Envelope) error {
	key := "roster." + env.Host
	m := &message{headers: env.Headers(), body: clone(env.Body), key: key, id: env.MsgID, ttl: env.ExpiresAt.Sub(env.TS), hasTTL: true}
	return t.do(ctx, func() error {
		t.n.publishLocked(ExchangeRoster, key, m)
		return nil
	})
}

// ConsumePresence implements bridge.PresenceTransport: roster.<host> is
// exclusive to this connection and deleted with it, so a second gateway
// with the same host id is refused.
func (t *Transport) ConsumePresence(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	name := RosterQueue(host)
	c := t.newConsumer(name, 256, false)
	c.deliver = func(m message, a bridge.Acker) { h(delivery(m, a)) }
	c.declare = func() error {
		q := t.n.queues[name]
		if q != nil && q.owner != t {
			return fmt.Errorf("%w: %s is held by another connection: another gateway already runs with host id %q; give each gateway its own host id", bridge.ErrConsumerExists, name, host)
		}
		if q == nil {
			q = t.n.declareLocked(name, queueArgs{deadLetter: true}, t)
			t.n.bindLocked(ExchangeRoster, "roster.#", q)
		}
		return nil
	}
	return t.start(ctx, c, c.declare)
}

// PublishControl implements bridge.ControlTransport: mandatory, so a host
// that never ran a gateway on this network is an immediate error.
func (t *Transport) PublishControl(ctx context.Context, host string, env *bridge.Envelope) error {
	m := &message{headers: env.Headers(), body: clone(env.Body), key: host, id: env.MsgID}
	var routed int
	if err := t.do(ctx, func() error {
		routed, _ = t.n.publishLocked(ExchangeControl, host, m)
		return nil
	}); err != nil {
		return err
	}
	if routed == 0 {
		return fmt.Errorf("%w: no control queue for host %q (no gateway of that host on this network)", bridge.ErrUnroutable, host)
	}
	return nil
}

// ConsumeControl implements bridge.ControlTransport: control.<host> is
// durable, consumed exclusively, manual-ack.
func (t *Transport) ConsumeControl(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	name := ControlQueue(host)
	c := t.newConsumer(name, 4, true)
	c.deliver = func(m message, a bridge.Acker) { h(delivery(m, a)) }
	c.declare = func() error {
		if t.n.queues[name] == nil {
			t.n.bindLocked(ExchangeControl, host, t.n.declareLocked(name, queueArgs{deadLetter: true}, nil))
		}
		return nil
	}
	return t.start(ctx, c, c.declare)
}

// start attaches c now (so a refusal is the caller's error), after check
// (under the lock), and starts its goroutine.
func (t *Transport) start(ctx context.Context, c *consumer, check func() error) (bridge.Subscription, error) {
	err := t.do(ctx, func() error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		if err := t.n.attachLocked(c); err != nil {
			return err
		}
		t.consumers[c] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	go c.run()
	return c, nil
}

// Close cancels this connection's consumers (what they held unsettled goes
// back to the queues) and deletes its exclusive queues. Idempotent.
func (t *Transport) Close() error {
	t.n.mu.Lock()
	if t.closed {
		t.n.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	delete(t.n.conns, t)
	cons := make([]*consumer, 0, len(t.consumers))
	for c := range t.consumers {
		cons = append(cons, c)
	}
	t.n.mu.Unlock()
	for _, c := range cons {
		c.Cancel()
	}
	t.n.mu.Lock()
	t.dropExclusiveLocked()
	t.n.mu.Unlock()
	return nil
}

func (t *Transport) dropExclusiveLocked() {
	for _, q := range t.n.queues {
		if q.owner == t {
			t.n.dropQueueLocked(q)
		}
	}
}

// Connected reports whether the link is up (not LinkDown, not closed), as
// the broker transport's Connected does.
func (t *Transport) Connected() bool {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	return !t.closed && !t.down
}

// LinkDown simulates losing the connection (a broker blip, a partitioned
// host): every consumer of this connection is detached — what it held
// unsettled is delivered again later, and acks of it fail — its exclusive
// queues (the roster queue) are gone, and publishes and declares wait for
// LinkUp (or their ctx).
func (t *Transport) LinkDown() {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	if t.closed || t.down {
		return
	}
	t.down = true
	t.up = make(chan struct{})
	for c := range t.consumers {
		t.n.detachLocked(c)
	}
	t.dropExclusiveLocked()
}

// LinkUp ends LinkDown: as the broker transport does after a reconnect,
// the queues its consumers need are declared again and every consumer is
// re-attached.
func (t *Transport) LinkUp() {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	if t.closed || !t.down {
		return
	}
	t.down = false
	close(t.up)
	for c := range t.consumers {
		var err error
		if c.declare != nil {
			err = c.declare()
		}
		if err == nil {
			err = t.n.attachLocked(c)
		}
		if err != nil {
			t.n.log.Warn("re-attaching a consumer after the link came back failed", "queue", c.queue, "err", err)
		}
	}
}

// CloseInbox implements bridge.Transport: every binding of the inbox goes
// (the queue stays, consumed as before), and what waits is its ready
// messages plus those handed out and not settled. A publish is routed
// under the network's lock, so none can be on its way in.
func (t *Transport) CloseInbox(ctx context.Context, gid string) (int, error) {
	waiting := 0
	err := t.do(ctx, func() error {
		q := t.n.queues[bridge.InboxQueueName(gid)]
		if q == nil {
			return nil
		}
		for b := range q.bound {
			t.n.unbindLocked(b.ex, b.key, q)
		}
		waiting = len(q.ready)
		for _, c := range q.cons {
			waiting += len(c.unacked)
		}
		return nil
	})
	return waiting, err
}
