package broker

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.ControlTransport = (*Transport)(nil)

// ControlQueue is host's durable control queue, bound to bridge.control
// with the host id as key.
func ControlQueue(host string) string { return "control." + host }

// PublishControl implements bridge.ControlTransport: mandatory, so a host
// that never ran a gateway on this broker is an immediate error.
func (t *Transport) PublishControl(ctx context.Context, host string, env *bridge.Envelope) error {
	_, pub, err := t.waitUpToPublish(ctx)
	if err != nil {
		return err
	}
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, ExchangeControl, host, true, false, amqp.Publishing{
		Headers: amqp.Table(env.Headers()), DeliveryMode: amqp.Persistent, MessageId: env.MsgID,
		Timestamp: env.TS, ContentType: "application/json", Body: env.Body,
	})
	if err != nil {
		return fmt.Errorf("broker: publish control to %s: %w", host, err)
	}
	t.counts.published()
	acked, err := dc.WaitContext(ctx)
	t.counts.settled()
	if err != nil {
		return fmt.Errorf("broker: publish control to %s: %w", host, err)
	}
	t.counts.confirmed(acked)
	if !acked {
		return fmt.Errorf("broker: control message to %s was not confirmed", host)
	}
	if t.wasReturned(env.MsgID) {
		return fmt.Errorf("%w: no control queue for host %q (no gateway of that host on this broker)", bridge.ErrUnroutable, host)
	}
	return nil
}

// ConsumeControl implements bridge.ControlTransport: the control queue of
// this transport's queue type (one consumer: exclusive on classic, single
// active on quorum). The other type's control queue of the host, left by
// an earlier gateway, is unbound and drained first (migrate.go).
func (t *Transport) ConsumeControl(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	q := ControlQueueOf(host, t.qtype)
	c := &consumer{t: t, queue: q, prefetch: 4, exclusive: t.qtype != QueueTypeQuorum, counted: controlDeliveries}
	c.declare = func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, true, false, false, false, controlArgs(t.qtype)); err != nil {
			return declareErr("queue", q, err)
		}
		return ch.QueueBind(q, host, ExchangeControl, false, nil)
	}
	c.deliver = func(d amqp.Delivery, a *acker) { h(delivery(d, a)) }
	legacy := ControlQueueOf(host, otherType(t.qtype))
	if err := t.findLegacy(ctx, c, legacy); err != nil {
		return nil, err
	}
	if c.legacy != "" {
		if err := t.unbindControl(ctx, c, host); err != nil {
			return nil, err
		}
	}
	return t.start(ctx, c)
}

// unbindControl declares and binds the new control queue (step 1), then
// unbinds the legacy one (step 2): a control message published meanwhile
// lands in both, and the receiver de-duplicates it by msgId.
func (t *Transport) unbindControl(ctx context.Context, c *consumer, host string) error {
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	if err := c.declare(ch); err != nil {
		return err
	}
	if err := ch.QueueUnbind(c.legacy, host, ExchangeControl, nil); err != nil && !isNotFound(err) {
		return fmt.Errorf("broker: unbind %s: %w", c.legacy, err)
	}
	return nil
}
