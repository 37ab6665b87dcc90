package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// inboxArgs are an inbox's queue arguments (SPEC §5). Overflow is
// reject-publish-dlx, or reject-publish where that is what keeps the
// promise (LavinMQ: overflow.go; quorum queues, which have no
// reject-publish-dlx): the publisher is nacked — so a sender hears "inbox
// full" — and the message is dead-lettered, never dropped in silence.
func inboxArgs(spec bridge.InboxSpec, overflow, qtype string) amqp.Table {
	args := amqp.Table{"x-dead-letter-exchange": ExchangeDLX}
	if qtype == QueueTypeQuorum {
		args = quorumArgs()
	}
	if spec.MaxLength > 0 {
		args["x-max-length"] = int64(spec.MaxLength)
		if qtype != QueueTypeQuorum {
			args["x-overflow"] = overflow
		} else {
			args["x-max-length"] = quorumMaxLength(spec.MaxLength)
		}
	}
	if spec.MessageTTL > 0 {
		args["x-message-ttl"] = spec.MessageTTL.Milliseconds()
	}
	if spec.Expires > 0 {
		args["x-expires"] = spec.Expires.Milliseconds()
	}
	return args
}

func bindingKeys(gid string, groups []string) map[string]bool {
	keys := map[string]bool{gid: true, bridge.BroadcastAll: true}
	for _, g := range groups {
		keys[bridge.BroadcastKey(g)] = true
	}
	return keys
}

// DeclareInbox implements bridge.Transport.
func (t *Transport) DeclareInbox(ctx context.Context, gid string, spec bridge.InboxSpec) error {
	if _, _, err := t.waitUp(ctx); err != nil {
		return err
	}
	if err := t.declareInbox(gid, spec); err != nil {
		return err
	}
	t.mu.Lock()
	t.inboxes[gid] = spec
	t.mu.Unlock()
	return nil
}

func (t *Transport) declareInbox(gid string, spec bridge.InboxSpec) error {
	t.mu.Lock()
	conn := t.conn
	old := t.bound[gid]
	overflow := t.server.Overflow
	t.mu.Unlock()
	if conn == nil {
		return bridge.ErrClosed
	}
	q := t.InboxQueue(gid)
	if err := t.declareInboxQueue(conn, q, spec, overflow); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	want := bindingKeys(gid, spec.Groups)
	for key := range want {
		if err := ch.QueueBind(q, key, ExchangeMsg, false, nil); err != nil {
			return fmt.Errorf("broker: bind %s to %s: %w", q, key, err)
		}
	}
	for key := range old {
		if !want[key] {
			if err := ch.QueueUnbind(q, key, ExchangeMsg, nil); err != nil {
				return fmt.Errorf("broker: unbind %s from %s: %w", q, key, err)
			}
		}
	}
	t.mu.Lock()
	t.bound[gid] = want
	t.mu.Unlock()
	for key := range old {
		want[key] = true
	}
	return t.unbindLegacy(conn, gid, want) // after the new queue is bound: no message finds neither
}

// declareInboxQueue declares q. Where inboxes are reject-publish
// (LavinMQ) an inbox an older gateway declared reject-publish-dlx cannot
// be redeclared (PRECONDITION_FAILED: queue arguments never change): it is
// migrated — deleted while it is empty and unused, and declared anew —
// or, holding messages, kept as it is with a warning, and migrated by a
// later start that finds it empty.
func (t *Transport) declareInboxQueue(conn *amqp.Connection, q string, spec bridge.InboxSpec, overflow string) error {
	err := declareQueueOn(conn, q, inboxArgs(spec, overflow, t.qtype))
	if err == nil || t.qtype == QueueTypeQuorum || overflow != OverflowRejectPublish || spec.MaxLength <= 0 || !isPrecondition(err) {
		if err != nil {
			return declareErr("queue", q, err)
		}
		return nil
	}
	if declareQueueOn(conn, q, inboxArgs(spec, OverflowRejectPublishDLX, t.qtype)) != nil {
		return declareErr("queue", q, err) // it differs in more than its overflow
	}
	if deleteQueueOn(conn, q, true) == nil {
		if err := declareQueueOn(conn, q, inboxArgs(spec, overflow, t.qtype)); err != nil {
			return declareErr("queue", q, err)
		}
		t.log.Warn("inbox migrated from x-overflow reject-publish-dlx to reject-publish (this broker drops the oldest message of a full reject-publish-dlx queue)", "queue", q)
		return nil
	}
	t.log.Warn("inbox kept with x-overflow reject-publish-dlx, which this broker treats as drop-head: while it is full, each new message pushes its oldest out without a word. "+
		"It holds messages, so it cannot be migrated now: let its entity drain it, and the next gateway start migrates it", "queue", q)
	return nil
}

// declareQueueOn declares q on a throwaway channel (a 406 closes it).
func declareQueueOn(conn *amqp.Connection, q string, args amqp.Table) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclare(q, true, false, false, false, args)
	return err
}

// deleteQueueOn deletes q on a throwaway channel; with idle, only while it
// has no consumer and no message (else PRECONDITION_FAILED, nothing lost).
func deleteQueueOn(conn *amqp.Connection, q string, idle bool) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: open channel: %w", err)
	}
	defer ch.Close()
	_, err = ch.QueueDelete(q, idle, idle, false)
	return err
}

func isPrecondition(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed
}

// DeleteInbox implements bridge.Transport: the inbox of this transport's
// queue type, and the other type's if a migration left it.
func (t *Transport) DeleteInbox(ctx context.Context, gid string) error {
	t.mu.Lock()
	delete(t.inboxes, gid)
	delete(t.bound, gid)
	var cons []*consumer
	for c := range t.consumers {
		if c.queue == t.InboxQueue(gid) {
			cons = append(cons, c)
		}
	}
	t.mu.Unlock()
	for _, c := range cons {
		c.Cancel()
	}
	conn, _, err := t.waitUp(ctx)
	if err != nil {
		return err
	}
	for _, q := range []string{t.InboxQueue(gid), InboxQueue(gid, otherType(t.qtype))} {
		if err := deleteQueueOn(conn, q, false); err != nil && !isNotFound(err) {
			return fmt.Errorf("broker: delete %s: %w", q, err)
		}
	}
	return nil
}

// Publish implements bridge.Transport: persistent, on the confirm channel;
// mandatory unless told otherwise. Publishes pipeline: concurrent calls
// share the channel's confirm window — each writes its frames (the
// channel's lock is held for the write only) and then waits for its own
// deferred confirm, so n sends in flight cost one confirm round trip, not
// n, and a nack, a return or a lost channel concerns exactly the publishes
// it names (Counts.Unconfirmed is the window). The caller signs before it
// calls: nothing here holds a lock across the crypto or the confirm. A
// return arrives before its confirm, so a confirmed publish is checked
// against the returns before it counts as routed. A connection lost before
// the confirm means the outcome is unknown: the same envelope (same msgId,
// deduplicated by receivers) is published again once reconnected, until
// ctx ends.
func (t *Transport) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	msg := inboxPublishing(env)
	chanErrs := 0
	for attempt := 0; ; attempt++ {
		conn, pub, err := t.waitUpToPublish(ctx)
		if err != nil {
			if attempt > 0 {
				return fmt.Errorf("broker: publish %s: connection lost before the broker confirmed it, and not back (it may or may not have been delivered): %w", env.MsgID, err)
			}
			if errors.Is(err, bridge.ErrUnavailable) {
				return fmt.Errorf("broker: publish %s: not published: %w", env.MsgID, err)
			}
			return err
		}
		// the channel closed under a live connection: a channel exception
		// (watchPublish reopens it). Every publish in flight on it lost its
		// confirm and goes again; the one the broker keeps refusing gets the
		// broker's reason after a few tries.
		retryChannel := func() error {
			if chanErrs++; chanErrs >= 3 {
				t.mu.Lock()
				why := t.pubErr
				t.mu.Unlock()
				return fmt.Errorf("broker: publish %s: the broker closed the publish channel: %v", env.MsgID, why)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("broker: publish %s: %w", env.MsgID, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			return nil
		}
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, ExchangeMsg, key, mandatory, false, msg)
		if err != nil {
			if err := t.publishFailed(conn, env, err, retryChannel); err != nil {
				return err
			}
			continue // publish again
		}
		t.counts.published()
		again, err := t.awaitConfirm(ctx, conn, pub, dc, key, env, mandatory, retryChannel)
		t.counts.settled()
		if !again {
			return err
		}
	}
}

// drainReturns records every return waiting in rs (under pubMu) and
// reports whether rs is still open.
func (t *Transport) drainReturns(rs chan amqp.Return, now time.Time) (open bool) {
	for {
		select {
		case r, ok := <-rs:
			if !ok {
				return false
			}
			t.returned[r.MessageId] = now
			t.counts.returns.Add(1)
		default:
			return true
		}
	}
}

// dropRetired forgets a replaced publish channel's returns once it closed.
func (t *Transport) dropRetired(rs chan amqp.Return) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, r := range t.retired {
		if r == rs {
			t.retired = append(t.retired[:i:i], t.retired[i+1:]...)
			return
		}
	}
}

// inboxPublishing is env as an AMQP message for an inbox: persistent.
func inboxPublishing(env *bridge.Envelope) amqp.Publishing {
	return amqp.Publishing{
		Headers:      amqp.Table(env.Headers()),
		DeliveryMode: amqp.Persistent,
		MessageId:    env.MsgID,
		Timestamp:    env.TS,
		ContentType:  "text/plain; charset=utf-8",
		Body:         env.Body,
	}
}

// awaitConfirm waits for one publish's own confirm and judges it: again
// means its channel was lost before the broker settled it (the outcome is
// unknown: publish it again), else err is the publish's result. Its
// caller counts the publish in the confirm window (counts.go): a run's
// are all in it from their write.
func (t *Transport) awaitConfirm(ctx context.Context, conn *amqp.Connection, pub *amqp.Channel, dc *amqp.DeferredConfirmation,
	key string, env *bridge.Envelope, mandatory bool, retryChannel func() error) (again bool, err error) {
	acked, stalled, err := t.waitConfirm(ctx, conn, dc, env)
	if stalled {
		return true, nil // outcome unknown, as with a lost connection: publish again
	}
	if err != nil {
		return false, fmt.Errorf("broker: publish %s: %w", env.MsgID, err)
	}
	if acked || !pub.IsClosed() { // a closed channel's publishes were lost, not nacked
		t.counts.confirmed(acked)
	}
	if !acked {
		if pub.IsClosed() {
			if !conn.IsClosed() {
				if err := retryChannel(); err != nil {
					return false, err
				}
			}
			return true, nil // lost, not nacked: outcome unknown, publish again
		}
		if t.nackedWhileNotFull(ctx, conn, pub, key, env) {
			return true, nil // a quorum queue between leaders: publish again (same msgId)
		}
		if t.overflow() == OverflowRejectPublish {
			t.deadLetterRefused(ctx, pub, key, env) // the broker did not
		}
		if bridge.IsBroadcastKey(key) {
			return false, nil // a full inbox refused its copy; it was dead-lettered
		}
		return false, fmt.Errorf("%w: %s refused the message", bridge.ErrInboxFull, t.InboxQueue(key))
	}
	t.nacks.confirmed(key)
	if mandatory && t.wasReturned(env.MsgID) {
		return false, fmt.Errorf("%w: %s", bridge.ErrUnroutable, key)
	}
	return false, nil
}

// waitConfirm waits for dc's confirm, at most ConfirmTimeout while the
// connection is up. A node that keeps the TCP connection but cannot
// confirm (cut off from its cluster's majority, a quorum publish waiting
// on it forever) would hold every publish until its caller gives up: past
// the bound the connection is closed — the supervisor moves to another
// node — and stalled says the publish goes again, its outcome unknown.
// Not while the broker says it blocks publishing (a resource alarm): that
// holds on every node, and the publish waits for it as before.
func (t *Transport) waitConfirm(ctx context.Context, conn *amqp.Connection, dc *amqp.DeferredConfirmation,
	env *bridge.Envelope) (acked, stalled bool, err error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, t.opts.ConfirmTimeout)
		acked, err = dc.WaitContext(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return acked, false, err
		}
		if !t.blocked.Load() || conn.IsClosed() {
			break
		}
		// a resource alarm holds it, on every node: wait, do not move
	}
	if !conn.IsClosed() {
		t.log.Warn("broker confirm stalled; closing the connection to move to another node", bridge.LogMsgID, env.MsgID,
			bridge.LogTraceID, env.TraceID, "node", t.Server().Node, "waited", t.opts.ConfirmTimeout)
		_ = conn.CloseDeadline(time.Now().Add(time.Second)) // close-ok may never come back on a stalled link
	}
	return false, true, nil
}

// publishFailed decides what a publish that failed with err does: nil is
// publish again (the channel or the connection went away under it: its
// outcome is unknown), else the error to return.
func (t *Transport) publishFailed(conn *amqp.Connection, env *bridge.Envelope, err error, retryChannel func() error) error {
	switch {
	case errors.Is(err, amqp.ErrClosed):
		if !conn.IsClosed() {
			return retryChannel()
		}
		return nil // reconnecting
	case linkBroken(err):
		// the socket failed under the write (a reset as the broker stops):
		// the connection is gone though not yet marked so. Close it for the
		// supervisor, and publish again once reconnected.
		t.log.Warn("broker connection failed under a publish; reconnecting", bridge.LogMsgID, env.MsgID, bridge.LogTraceID, env.TraceID, "err", err)
		conn.Close()
		return nil
	}
	return fmt.Errorf("broker: publish %s: %w", env.MsgID, err)
}

// linkBroken reports whether a publish failed because the connection's
// socket did (a write error), not because the broker refused it.
func linkBroken(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// wasReturned drains the returns that arrived (a return is in the channel
// before its confirm) and reports whether msgID was among them.
func (t *Transport) wasReturned(msgID string) bool {
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	t.mu.Lock()
	returns := t.returns
	var retired []chan amqp.Return
	if len(t.retired) > 0 { // only after a channel was replaced: no copy on every publish's path
		retired = append(retired, t.retired...)
	}
	t.mu.Unlock()
	now := time.Now()
	t.drainReturns(returns, now)
	for _, rs := range retired {
		if !t.drainReturns(rs, now) {
			t.dropRetired(rs)
		}
	}
	_, ok := t.returned[msgID]
	delete(t.returned, msgID)
	for id, at := range t.returned { // returns whose publisher gave up
		if now.Sub(at) > time.Minute {
			delete(t.returned, id)
		}
	}
	return ok
}
