package broker

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
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
	total := 0
	for _, q := range []string{t.InboxQueue(gid), InboxQueue(gid, otherType(t.qtype))} { // and a migration's legacy queue
		n, found, err := queueCount(conn, q)
		if err != nil {
			return 0, err
		}
		if !found {
			continue
		}
		for key := range keys {
			if err := t.unbind(conn, q, key); err != nil {
				return 0, err
			}
		}
		if n, _, err = queueCount(conn, q); err != nil { // counted after the unbind: nothing arrives since
			return 0, err
		}
		total += n
	}
	return total, nil
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
