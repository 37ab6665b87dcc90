package broker

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// CloseInbox implements bridge.Transport: every binding of the inbox on
// bridge.msg is removed (the queue stays, and its consumer with it), then
// a passive declare counts what the queue holds. AMQP has no count of a
// queue's unacked messages, so the core counts again after cancelling its
// consumer (which returns them to the queue) before it deletes the queue.
func (t *Transport) CloseInbox(ctx context.Context, gid string) (int, error) {
	t.mu.Lock()
	keys := bindingKeys(gid, t.inboxes[gid].Groups)
	for k := range t.bound[gid] {
		keys[k] = true
	}
	delete(t.bound, gid)
	t.mu.Unlock()
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return 0, err
	}
	q := bridge.InboxQueueName(gid)
	for key := range keys {
		if err := t.unbind(conn, q, key); err != nil {
			return 0, err
		}
	}
	ch, err := conn.Channel() // a throwaway channel: a 404 closes it
	if err != nil {
		return 0, fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return 0, nil
		}
		return 0, fmt.Errorf("broker: count %s: %w", q, err)
	}
	return st.Messages, nil
}

// unbind removes one binding of q, each on its own channel: a binding
// that does not exist (a group the queue was never bound to) is a 404,
// which closes the channel and is no error here.
func (t *Transport) unbind(conn *amqp.Connection, q, key string) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	if err := ch.QueueUnbind(q, key, ExchangeMsg, nil); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return nil
		}
		return fmt.Errorf("broker: unbind %s from %s: %w", q, key, err)
	}
	return nil
}
