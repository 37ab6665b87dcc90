package broker

import (
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A quorum queue takes a closed channel's unacked deliveries back
// asynchronously: channel.close-ok comes first, the queue's leader returns
// the messages when it handles the channel's exit. The removal counts an
// inbox right after cancelling its consumer (Core.closeAndDrain), so a
// count taken in between missed what the consumer held — up to its
// prefetch (TestCloseInboxMidDrain under load: 112 of 120, 8 short) — and
// the inbox would be deleted with them unreported. The queue drops the
// consumer and returns its messages in one step, so once it lists one
// consumer fewer the count is whole: Cancel waits for that, bounded.

// releaseWait bounds the wait for a queue to let go of a cancelled
// consumer; past it the removal's own loop counts again anyway.
const releaseWait = 3 * time.Second

// closeReleased closes c's channel ch and waits until each of c's queues
// lists one consumer fewer than before (a quorum inbox may also list a
// standby gateway's), or releaseWait passed, or the link is gone (the
// broker then returns the messages with the connection).
func (c *consumer) closeReleased(ch *amqp.Channel) {
	t := c.t
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	queues := []string{c.queue}
	if c.legacy != "" {
		queues = append(queues, c.legacy)
	}
	before := make([]int, len(queues))
	for i, q := range queues {
		if conn != nil && !conn.IsClosed() {
			before[i], _ = queueConsumers(conn, q)
		}
	}
	ch.Close()
	deadline := time.Now().Add(releaseWait)
	for i, q := range queues {
		for before[i] > 0 && conn != nil && !conn.IsClosed() {
			n, err := queueConsumers(conn, q)
			if err != nil || n < before[i] {
				break
			}
			if time.Now().After(deadline) {
				t.log.Warn("a cancelled consumer is still listed by its queue; counting it anyway", "queue", q, "consumers", n, "waited", releaseWait)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// queueConsumers is q's consumer count by a passive declare on a
// throwaway channel; a queue that is gone has none.
func queueConsumers(conn *amqp.Connection, q string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("broker: check %s: %w", q, err)
	}
	return st.Consumers, nil
}
