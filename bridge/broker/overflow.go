package broker

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// What a full inbox does (x-overflow). RabbitMQ's reject-publish-dlx nacks
// the publisher and dead-letters the message: the sender hears "inbox
// full" and the message is in the dead-letter log. LavinMQ accepts the
// same argument but treats it as drop-head (its queue code): the oldest
// message would leave the full inbox in silence. There the inboxes are
// declared reject-publish, which both brokers implement alike — the
// publisher is nacked and nothing is dead-lettered — and this transport
// writes the dead letter itself (deadLetterRefused), so the promise is the
// same on both.
const (
	OverflowRejectPublishDLX = "reject-publish-dlx"
	OverflowRejectPublish    = "reject-publish"
)

// ParseOverflow checks a configured overflow mode: "" (chosen by the
// broker's product), or one of the two.
func ParseOverflow(s string) (string, error) {
	switch s {
	case "", "auto":
		return "", nil
	case OverflowRejectPublishDLX, OverflowRejectPublish:
		return s, nil
	}
	return "", fmt.Errorf("broker overflow %q: use %s, %s, or leave it unset to choose by the broker's product", s, OverflowRejectPublish, OverflowRejectPublishDLX)
}

// ServerInfo is what the broker said about itself in connection.start.
type ServerInfo struct {
	Product  string `json:"product,omitempty"` // "RabbitMQ", "LavinMQ", …
	Version  string `json:"version,omitempty"`
	Overflow string `json:"overflow"` // the x-overflow inboxes are declared with
	// Node is the connected node's host:port (no credentials); ClusterName
	// the cluster_name it reports (RabbitMQ; empty elsewhere).
	Node        string `json:"node,omitempty"`
	ClusterName string `json:"clusterName,omitempty"`
}

// serverOf is what conn's broker is, with this transport's queue type.
// The first connect fixes the type: LavinMQ, which has no quorum queues
// (it declares a quorum queue as its default one), keeps classic. Quorum
// inboxes are reject-publish (they have no reject-publish-dlx): the
// transport dead-letters what a full one refuses.
func (t *Transport) serverOf(conn *amqp.Connection) ServerInfo {
	si := serverInfo(conn.Properties, t.opts.Overflow)
	t.mu.Lock()
	first := t.conn == nil
	t.mu.Unlock()
	if first && t.qtype == QueueTypeQuorum && strings.EqualFold(si.Product, "LavinMQ") {
		t.log.Warn("queue type quorum asked for, but LavinMQ has no quorum queues: classic queues are used")
		t.qtype = QueueTypeClassic
	}
	if t.qtype == QueueTypeQuorum {
		si.Overflow = OverflowRejectPublish
	}
	return si
}

// serverInfo reads the server properties of connection.start (untrusted
// in form: any value of any type) and picks the overflow mode: forced, if
// configured, else reject-publish on LavinMQ and reject-publish-dlx on
// everything else.
func serverInfo(props amqp.Table, forced string) ServerInfo {
	text := func(k string) string { return propText(props[k]) }
	si := ServerInfo{Product: text("product"), Version: text("version"), Overflow: forced, ClusterName: text("cluster_name")}
	if si.Overflow == "" {
		si.Overflow = OverflowRejectPublishDLX
		if strings.EqualFold(si.Product, "LavinMQ") {
			si.Overflow = OverflowRejectPublish
		}
	}
	return si
}

// propText is a server property as short, printable text: at most 64
// bytes, control and format characters dropped (doctor shows it).
func propText(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	}
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > 64 {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Server is what the broker of the current connection says it is, and the
// overflow mode in use (doctor, stats).
func (t *Transport) Server() ServerInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.server
}

func (t *Transport) overflow() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.server.Overflow
}

// deadLetterRefused writes to its type's dead-letter exchange the message a full inbox refused
// under reject-publish, as the broker would have under
// reject-publish-dlx (reason maxlen, the queue it was refused by), so
// that it is in a dead-letter log all the same. A broadcast's nack does
// not say which inbox refused its copy: the queue is given as its key.
func (t *Transport) deadLetterRefused(ctx context.Context, pub *amqp.Channel, key string, env *bridge.Envelope) {
	queue := t.InboxQueue(key)
	if bridge.IsBroadcastKey(key) {
		queue = "an inbox bound to " + key
	}
	h := amqp.Table(env.Headers())
	h["x-first-death-reason"], h["x-first-death-queue"] = bridge.ReasonMaxLen, queue
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, dlxOf(t.qtype), "", false, false, amqp.Publishing{
		Headers: h, DeliveryMode: amqp.Persistent, MessageId: env.MsgID, Timestamp: env.TS,
		ContentType: "text/plain; charset=utf-8", Body: env.Body})
	if err == nil {
		t.counts.published()
		var acked bool
		acked, err = dc.WaitContext(ctx)
		t.counts.settled()
		if err == nil && !acked {
			err = fmt.Errorf("the broker did not confirm it")
		}
	}
	if err != nil {
		t.log.Error("a message a full inbox refused could not be written to the dead-letter queue (its sender was told the inbox is full)",
			bridge.LogMsgID, env.MsgID, bridge.LogTraceID, env.TraceID, "queue", queue, "err", err)
	}
}
