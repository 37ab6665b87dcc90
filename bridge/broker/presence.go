package broker

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.PresenceTransport = (*Transport)(nil)

// RosterQueue is host's presence queue: exclusive and auto-delete, so
// presence stays soft state and a second gateway with the same host id is
// refused.
func RosterQueue(host string) string { return "roster." + host }

// PublishPresence implements bridge.PresenceTransport.
func (t *Transport) PublishPresence(ctx context.Context, env *bridge.Envelope) error {
	_, pub, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, ExchangeRoster, "roster."+env.Host, false, false, amqp.Publishing{
		Headers: amqp.Table(env.Headers()), MessageId: env.MsgID, Timestamp: env.TS,
		ContentType: "application/json", Body: env.Body,
		Expiration: fmt.Sprint(env.ExpiresAt.Sub(env.TS).Milliseconds()), // a stale heartbeat is worthless
	})
	if err != nil {
		return fmt.Errorf("broker: publish presence: %w", err)
	}
	t.counts.published()
	acked, err := dc.WaitContext(ctx)
	t.counts.settled()
	if err != nil {
		return fmt.Errorf("broker: publish presence: %w", err)
	}
	t.counts.confirmed(acked)
	return nil
}

// ConsumePresence implements bridge.PresenceTransport.
func (t *Transport) ConsumePresence(ctx context.Context, host string, h func(bridge.Delivery)) (bridge.Subscription, error) {
	q := RosterQueue(host)
	c := &consumer{t: t, queue: q, prefetch: 256, counted: presenceDeliveries}
	c.declare = func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, false, true, true, false, amqp.Table{"x-dead-letter-exchange": ExchangeDLX}); err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.ResourceLocked {
				return fmt.Errorf("broker: %s is held by another connection: another gateway already runs with host id %q; give each gateway its own --host-id", q, host)
			}
			return declareErr("queue", q, err)
		}
		return ch.QueueBind(q, "roster.#", ExchangeRoster, false, nil)
	}
	c.deliver = func(d amqp.Delivery, a *acker) { h(delivery(d, a)) }
	return t.start(ctx, c)
}
