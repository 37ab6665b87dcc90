package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Migration between queue types (README "Queue types"). x-queue-type
// never changes on an existing queue, so a gateway whose type changed
// finds its inboxes (and its control queue) under the other type's name:
// the legacy queue. It (1) declares and binds the queue of its type, (2)
// unbinds the legacy one — a message published between the two lands in
// both, and the receiver's msgId de-duplication drops the second copy —
// and (3) consumes the legacy queue first, handing its messages to the
// same handler so that per-sender order holds, deleting it once it holds
// nothing and nothing of it is unacked; then it consumes its own queue.
// A crash on the way leaves the legacy queue in place: the next start
// resumes the drain.

// legacyPoll is how often a draining consumer asks whether its legacy
// queue is empty.
const legacyPoll = 100 * time.Millisecond

// legacyTag is the consumer tag of a legacy queue's drain, so that it
// can be cancelled on its own channel (retire).
const legacyTag = "herdbridge.legacy-drain"

// queueCount is q's ready count, found false when q does not exist (a
// passive declare on a throwaway channel: a 404 closes it).
func queueCount(conn *amqp.Connection, q string) (n int, found bool, err error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, false, fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("broker: check %s: %w", q, err)
	}
	return st.Messages, true, nil
}

// unbindLegacy removes the legacy inbox's bindings on bridge.msg, so that
// nothing new lands in it; a binding it never had is no error.
func (t *Transport) unbindLegacy(conn *amqp.Connection, gid string, keys map[string]bool) error {
	legacy := InboxQueue(gid, otherType(t.qtype))
	n, found, err := queueCount(conn, legacy)
	if err != nil || !found {
		return err
	}
	for key := range keys {
		if err := t.unbind(conn, legacy, key); err != nil {
			return err
		}
	}
	t.log.Info("inbox migration: the "+otherType(t.qtype)+" inbox is unbound and drained before the "+t.qtype+" one is consumed",
		"legacy", legacy, "queue", t.InboxQueue(gid), "waiting", n)
	return nil
}

// findLegacy sets c to drain legacy first, if it exists.
func (t *Transport) findLegacy(ctx context.Context, c *consumer, legacy string) error {
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	_, found, err := queueCount(conn, legacy)
	if err != nil || !found {
		return err
	}
	c.legacy, c.legacyExclusive = legacy, otherType(t.qtype) == QueueTypeClassic
	return nil
}

// attachFirst is the consumer's first attachment: its legacy queue while
// it has one, else its own.
func (c *consumer) attachFirst(conn *amqp.Connection) (*amqp.Channel, <-chan amqp.Delivery, error) {
	if c.legacy == "" {
		return c.attach(conn)
	}
	c.gen.Add(1)
	c.pending.Store(0)
	return c.attachTo(conn, c.legacy, legacyTag, c.legacyExclusive, nil)
}

// drainLegacy consumes the legacy queue until it is deleted, then
// attaches the consumer's own queue; ok is false when the consumer was
// stopped.
func (c *consumer) drainLegacy(ch *amqp.Channel, deliveries <-chan amqp.Delivery) (*amqp.Channel, <-chan amqp.Delivery, bool) {
	tick := time.NewTicker(legacyPoll)
	defer tick.Stop()
	moved := 0
	for {
		select {
		case d, open := <-deliveries:
			if !open { // the channel or the connection went: attach it again
				var ok bool
				if ch, deliveries, ok = c.reattach(); !ok {
					return nil, nil, false
				}
				continue
			}
			moved++
			c.deliverLegacy(d)
		case <-c.stop:
			c.closeReleased(ch) // unacked deliveries go back to the legacy queue
			return nil, nil, false
		case <-tick.C:
			if c.pending.Load() > 0 || !c.legacyEmpty() {
				continue
			}
			n, cancelled, ok := c.stopLegacy(ch, deliveries)
			moved += n
			if !ok {
				return nil, nil, false
			}
			if !cancelled || !c.retireLegacy(ch, moved) {
				continue // deliveries is closed now: the next read re-attaches
			}
			c.legacy = ""
			return c.reattach()
		}
	}
}

// legacyEmpty: the legacy queue holds nothing ready. Its messages pushed
// to this consumer and not yet read from deliveries are not counted (the
// broker has them as unacked): stopLegacy takes those in before the
// queue is retired.
func (c *consumer) legacyEmpty() bool {
	t := c.t
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		return false
	}
	n, found, err := queueCount(conn, c.legacy)
	return err == nil && (!found || n == 0)
}

// stopLegacy cancels the drain's consume, hands on every delivery the
// broker had pushed before the cancel, and waits until each is settled:
// closing the channel with them unread would return them to the queue
// asynchronously (a quorum queue's returns are a Raft command), after the
// count that lets retireLegacy delete it — lost with the queue
// (TestRetireWithDeliveriesInFlight). cancelled is false when the
// cancel failed (the channel went, and what it held goes back to the
// queue in the broker's own time: not a moment to count it); ok is false
// when the consumer was stopped meanwhile.
func (c *consumer) stopLegacy(ch *amqp.Channel, deliveries <-chan amqp.Delivery) (moved int, cancelled, ok bool) {
	cancelled = true
	if err := ch.Cancel(legacyTag, false); err != nil {
		c.t.log.Debug("cancelling a legacy drain failed (its channel went; it re-attaches)", "legacy", c.legacy, "err", err)
		ch.Close() // deliveries closes with it
		cancelled = false
	}
	for d := range deliveries { // closed after the cancel-ok, once what came before it is read
		moved++
		c.deliverLegacy(d)
	}
	for c.pending.Load() > 0 {
		select {
		case <-c.stop:
			ch.Close()
			return moved, cancelled, false
		case <-time.After(legacyPoll):
		}
	}
	return moved, cancelled, true
}

// deliverLegacy hands d on, counted as pending until it is settled; a
// settle of an earlier attachment's delivery (its tag void since) does
// not count.
func (c *consumer) deliverLegacy(d amqp.Delivery) {
	gen := c.gen.Load()
	c.pending.Add(1)
	c.t.counts.delivered(c.counted)
	c.deliver(d, &acker{d: d, log: c.t.log, onSettle: func() {
		if c.gen.Load() == gen {
			c.pending.Add(-1)
		}
	}})
}

// retireLegacy deletes the legacy queue if it is empty, closing the
// channel that consumes it (nothing of it is unacked: pending is 0).
// False: it still holds messages, or the delete was refused (a message
// arrived meanwhile); the caller goes on draining, re-attached.
func (c *consumer) retireLegacy(ch *amqp.Channel, moved int) bool {
	t := c.t
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		return false
	}
	n, found, err := queueCount(conn, c.legacy)
	if err != nil || (found && n > 0) {
		return false
	}
	ch.Close() // nothing of the queue is unacked here: stopLegacy took in and settled what was pushed
	if found && !c.deleteLegacy(conn) {
		return false
	}
	t.log.Info(fmt.Sprintf("%s migrated %s->%s", c.kind(), otherType(t.qtype), t.qtype), "legacy", c.legacy, "queue", c.queue, "moved", moved)
	return true
}

// deleteLegacy deletes the drained legacy queue. A classic one is
// deleted only while empty and unused (the broker checks). Quorum queues
// refuse those flags (not_implemented on 3.10), so a quorum one is
// counted again once this consumer's channel is closed — a delivery in
// flight went back to it — and deleted plainly: it is unbound, so nothing
// can arrive between the count and the delete.
func (c *consumer) deleteLegacy(conn *amqp.Connection) bool {
	quorum := otherType(c.t.qtype) == QueueTypeQuorum
	if quorum {
		if n, found, err := queueCount(conn, c.legacy); err != nil || !found || n > 0 {
			return err == nil && !found
		}
	}
	if err := deleteQueueOn(conn, c.legacy, !quorum); err != nil && !isNotFound(err) {
		c.t.log.Debug("legacy queue not deleted yet; draining on", "legacy", c.legacy, "err", err)
		return false
	}
	return true
}

// kind names what c consumes, for the migration's log line.
func (c *consumer) kind() string {
	if c.declare != nil {
		return "control queue"
	}
	return "inbox"
}

// reattach waits for the connection and attaches c again (its legacy
// queue while it has one); false: stopped.
func (c *consumer) reattach() (*amqp.Channel, <-chan amqp.Delivery, bool) {
	t := c.t
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
			return nil, nil, false
		}
		ch, deliveries, aerr := c.attachFirst(conn)
		if aerr == nil {
			return ch, deliveries, true
		}
		var ae *amqp.Error
		if c.legacy != "" && errors.As(aerr, &ae) && ae.Code == amqp.NotFound {
			c.legacy = "" // deleted meanwhile (another process finished the drain)
			continue
		}
		t.log.Warn("re-attaching a consumer failed; retrying", "queue", c.queue, "legacy", c.legacy, "err", aerr)
		select {
		case <-c.stop:
			return nil, nil, false
		case <-time.After(time.Second):
		}
	}
}

func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
