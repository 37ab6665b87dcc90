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

// ConsumeControl implements bridge.ControlTransport.
func (t *Transport) ConsumeControl(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	q := ControlQueue(host)
	c := &consumer{t: t, queue: q, prefetch: 4, exclusive: true}
	c.declare = func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-dead-letter-exchange": ExchangeDLX}); err != nil {
			return declareErr("queue", q, err)
		}
		return ch.QueueBind(q, host, ExchangeControl, false, nil)
	}
	c.deliver = func(d amqp.Delivery) { h(delivery(d, t)) }
	return t.start(ctx, c)
}
