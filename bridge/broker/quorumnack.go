package broker

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// A quorum queue nacks a publish for two reasons AMQP does not tell apart:
// it is over its x-max-length (reject-publish), or it cannot reach a
// majority right now — its leader's node was just killed and a new leader
// is not elected yet. The cluster's kill -9 test saw the second: every
// publish nacked for 16 s, each reported "inbox full" to its sender, and
// some of those messages were delivered all the same (enqueued before the
// nack was sent): a sender told "refused" for a message that arrived. So a
// quorum nack is judged by the queue's depth: below the inbox cap it is
// the cluster, not the inbox — the publish goes again, with the same msgId
// (the receiver drops a copy), until it is confirmed or the caller's
// bound ends (then the split transport spools it).

// quorumNackPause spaces the publishes of a message a leaderless quorum
// queue keeps nacking.
const quorumNackPause = 100 * time.Millisecond

// nackedWhileNotFull reports whether a nack of env for key's inbox should
// be published again: a quorum inbox, not a broadcast, that holds fewer
// messages than the inbox cap (or whose depth cannot be read now).
func (t *Transport) nackedWhileNotFull(ctx context.Context, conn *amqp.Connection, pub *amqp.Channel, key string, env *bridge.Envelope) bool {
	limit := t.inboxCap()
	if t.qtype != QueueTypeQuorum || bridge.IsBroadcastKey(key) || limit <= 0 {
		return false
	}
	depth, err := queueDepth(conn, t.InboxQueue(key))
	if err == nil && depth+1 >= limit {
		return false // full: the nack is the cap's
	}
	t.log.Warn("a quorum inbox refused a publish while below its cap (a leader election?): publishing it again",
		bridge.LogMsgID, env.MsgID, "queue", t.InboxQueue(key), "depth", depth, "err", err)
	if t.nacks.nacked(key, time.Now()) {
		t.askRotate(pub) // this channel may follow a dead leader: the publish goes again on a new one
	}
	select {
	case <-ctx.Done(): // publishing again ends on ctx: an unknown outcome, never "full"
	case <-time.After(quorumNackPause):
	}
	return true
}

// inboxCap is the largest inbox cap this transport declared: the fabric's
// gateways share one (InboxMaxLength), and a nack is judged against it.
func (t *Transport) inboxCap() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := 0
	for _, spec := range t.inboxes {
		limit = max(limit, spec.MaxLength)
	}
	return limit
}

// queueDepth is q's ready messages, by a passive declare on a throwaway
// channel (a 404 closes it).
func queueDepth(conn *amqp.Connection, q string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	return st.Messages, err
}
