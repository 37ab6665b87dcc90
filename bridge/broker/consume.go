package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// consumer is one manual-ack consumer of a queue, re-attached after every
// reconnect.
type consumer struct {
	t         *Transport
	queue     string
	prefetch  int
	exclusive bool
	counted   deliveryKind              // what Counts files its deliveries under
	declare   func(*amqp.Channel) error // declares the queue first (exclusive roster queues die with their connection)
	deliver   func(amqp.Delivery, *acker)
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	// legacy is the other queue type's queue of the same inbox (or control
	// queue), drained before queue is consumed (migrate.go); "" when none.
	legacy          string
	legacyExclusive bool
	pending         atomic.Int64 // legacy deliveries not settled yet, of generation gen
	gen             atomic.Int64 // the legacy attachment's generation: a settle of an older one is void
}

// Consume implements bridge.Transport: one consumer at a time — an
// exclusive one on classic queues, the single active consumer of a quorum
// inbox (which queues a second one instead of refusing it) — manual ack,
// at most prefetch unacked. An inbox of the other queue type is drained
// first (migrate.go).
func (t *Transport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	q := t.InboxQueue(gid)
	t.mu.Lock()
	_, declared := t.inboxes[gid]
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, bridge.ErrClosed
	}
	if !declared { // declared by an earlier process: the queue outlives it
		if err := t.queueExists(ctx, q); err != nil {
			return nil, fmt.Errorf("%w: %s (%v)", bridge.ErrNoInbox, gid, err)
		}
	}
	c := &consumer{t: t, queue: q, prefetch: max(prefetch, 1), exclusive: t.qtype != QueueTypeQuorum, counted: inboxDeliveries}
	c.deliver = func(d amqp.Delivery, a *acker) { h(delivery(d, a)) }
	if err := t.findLegacy(ctx, c, InboxQueue(gid, otherType(t.qtype))); err != nil {
		return nil, err
	}
	return t.start(ctx, c)
}

// delivery decodes d; undecodable headers are handed on with Err set, for
// the core to dead-letter and count.
func delivery(d amqp.Delivery, a *acker) bridge.Delivery {
	out := bridge.Delivery{Key: d.RoutingKey, Redelivered: d.Redelivered, ID: d.MessageId, Acker: a}
	out.Env, out.Err = bridge.FromHeaders(map[string]any(d.Headers), d.Body)
	return out
}

// ConsumeDeadLetters implements bridge.Transport. Every gateway consumes
// bridge.dlq (not exclusively): each dead letter reaches one of them. A
// quorum gateway consumes bridge.dlq.v3 as well: classic gateways still
// feed bridge.dlq during a rolling upgrade.
func (t *Transport) ConsumeDeadLetters(ctx context.Context, h func(bridge.DeadLetter)) (bridge.Subscription, error) {
	first, err := t.consumeDLQ(ctx, QueueDLQ, h)
	if err != nil || t.qtype != QueueTypeQuorum {
		return first, err
	}
	second, err := t.consumeDLQ(ctx, QueueDLQQuorum, h)
	if err != nil {
		first.Cancel()
		return nil, err
	}
	return subscriptions{first, second}, nil
}

// subscriptions cancel together.
type subscriptions []bridge.Subscription

func (s subscriptions) Cancel() {
	for _, sub := range s {
		sub.Cancel()
	}
}

func (t *Transport) consumeDLQ(ctx context.Context, q string, h func(bridge.DeadLetter)) (bridge.Subscription, error) {
	c := &consumer{t: t, queue: q, prefetch: 64, counted: deadLetterDeliveries}
	c.deliver = func(d amqp.Delivery, a *acker) {
		dl := bridge.DeadLetter{MsgID: d.MessageId, At: time.Now(), Acker: a}
		dl.Reason, dl.Queue = deathOf(d.Headers)
		if env, err := bridge.FromHeaders(map[string]any(d.Headers), d.Body); err == nil {
			dl.Env = env
		}
		h(dl)
	}
	return t.start(ctx, c)
}

// queueExists checks q with a passive declare on a throwaway channel (a
// 404 closes the channel).
func (t *Transport) queueExists(ctx context.Context, q string) error {
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	return err
}

// deathOf reads why and from where a message was dead-lettered.
func deathOf(h amqp.Table) (reason, queue string) {
	if r, ok := h["x-first-death-reason"].(string); ok {
		reason = r
	}
	if q, ok := h["x-first-death-queue"].(string); ok {
		queue = q
	}
	if deaths, ok := h["x-death"].([]any); ok && len(deaths) > 0 {
		if d, ok := deaths[0].(amqp.Table); ok {
			if reason == "" {
				reason, _ = d["reason"].(string)
			}
			if queue == "" {
				queue, _ = d["queue"].(string)
			}
		}
	}
	if reason == "" {
		reason = bridge.ReasonRejected
	}
	return reason, queue
}

// start attaches c now (so a refused exclusive consumer is an error the
// caller sees) and keeps it attached across reconnects.
func (t *Transport) start(ctx context.Context, c *consumer) (bridge.Subscription, error) {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return nil, err
	}
	ch, deliveries, err := c.attachFirst(conn)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ch.Close()
		return nil, bridge.ErrClosed
	}
	t.consumers[c] = true
	t.mu.Unlock()
	t.wg.Add(1)
	go c.run(ch, deliveries)
	return c, nil
}

func (c *consumer) attach(conn *amqp.Connection) (*amqp.Channel, <-chan amqp.Delivery, error) {
	return c.attachTo(conn, c.queue, "", c.exclusive, c.declare)
}

// attachTo opens a channel and consumes queue on it as tag ("": one the
// client library makes up), declaring it first with declare (if set).
func (c *consumer) attachTo(conn *amqp.Connection, queue, tag string, exclusive bool, declare func(*amqp.Channel) error) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("broker: open channel: %w", err)
	}
	if declare != nil {
		if err := declare(ch); err != nil {
			ch.Close()
			return nil, nil, err
		}
	}
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		ch.Close()
		return nil, nil, fmt.Errorf("broker: qos on %s: %w", queue, err)
	}
	deliveries, err := ch.Consume(queue, tag, false, exclusive, false, false, nil)
	if err != nil {
		ch.Close()
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.AccessRefused && permissionRefused(ae) {
			return nil, nil, accessErr("consume", queue, ae)
		}
		if errors.As(err, &ae) && ae.Code == amqp.AccessRefused {
			return nil, nil, fmt.Errorf("%w: %s is consumed by another gateway (%s): is a second gateway running with the same host id?", bridge.ErrConsumerExists, queue, ae.Reason)
		}
		return nil, nil, fmt.Errorf("broker: consume %s: %w", queue, err)
	}
	return ch, deliveries, nil
}

func (c *consumer) run(ch *amqp.Channel, deliveries <-chan amqp.Delivery) {
	t := c.t
	defer t.wg.Done()
	defer close(c.done)
	defer func() {
		t.mu.Lock()
		delete(t.consumers, c)
		t.mu.Unlock()
	}()
	if c.legacy != "" {
		var ok bool
		if ch, deliveries, ok = c.drainLegacy(ch, deliveries); !ok {
			return
		}
	}
	for {
		for open := true; open; {
			select {
			case d, ok := <-deliveries:
				if !ok {
					open = false
					break
				}
				t.counts.delivered(c.counted)
				c.deliver(d, &acker{d: d, log: t.log})
			case <-c.stop:
				c.closeReleased(ch) // unacked deliveries go back to the queue
				return
			}
		}
		// the channel or connection went away: re-attach once reconnected
		for {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-c.stop:
				case <-ctx.Done():
				}
				cancel()
			}()
			conn, _, err := t.waitUp(ctx)
			cancel()
			if err != nil {
				return // stopped or closed
			}
			var aerr error
			ch, deliveries, aerr = c.attach(conn)
			if aerr == nil {
				break
			}
			t.log.Warn("re-attaching a consumer failed; retrying", "queue", c.queue, "err", aerr)
			select {
			case <-c.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// Cancel implements bridge.Subscription.
func (c *consumer) Cancel() {
	c.once.Do(func() { close(c.stop) })
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// acker settles one delivery. After a reconnect its tag is void: the
// broker redelivers the message and the core deduplicates it.
type acker struct {
	d        amqp.Delivery
	log      interface{ Debug(string, ...any) }
	once     sync.Once
	err      error
	onSettle func() // a legacy queue's delivery: counted until settled (migrate.go)
}

func (a *acker) settled() {
	if a.onSettle != nil {
		a.onSettle()
	}
}

func (a *acker) Ack() error {
	a.once.Do(func() { a.err = a.d.Ack(false); a.settled() })
	return a.err
}

// Requeue puts a dead letter back in bridge.dlq for another try (a
// dead-letter notice that could not be forwarded yet).
func (a *acker) Requeue() error {
	a.once.Do(func() { a.err = a.d.Nack(false, true); a.settled() })
	return a.err
}

// Reject dead-letters (requeue=false); the reason is logged, since AMQP
// carries only "rejected" to the dead-letter queue.
func (a *acker) Reject(reason string) error {
	a.once.Do(func() {
		trace, _ := a.d.Headers[bridge.HdrTraceID].(string)
		a.log.Debug("rejecting to the dead-letter exchange", bridge.LogMsgID, a.d.MessageId, bridge.LogTraceID, trace, "reason", reason)
		a.err = a.d.Reject(false)
		a.settled()
	})
	return a.err
}
