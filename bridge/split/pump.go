package split

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// maxRefusals is how many times in a row the pump retries a message the
// broker refuses for a reason other than being unreachable (a permission,
// a channel exception) before it gives it up and reports it: one such
// message must not wedge the outbox behind it.
const maxRefusals = 5

// pumpBatch is how many messages the pump takes from the outbox at once:
// the window it publishes as one run (every message written, then every
// confirm waited) and removes in one commit — one confirm round trip and
// one fsync per window, not per message, so the outbox drains at the
// broker's rate and sends go straight to the broker again soon after it
// is back.
const pumpBatch = 128

// pumpState is what the pump carries from one window to the next.
type pumpState struct {
	refusals int // the head's refusals in a row (maxRefusals)
	// alone: the last run stopped short of its end on a live link, so the
	// head goes next by itself — a refusal is judged, and counted, on a
	// message published alone, never blamed on a window's first.
	alone bool
	// declaresSince: when the pump first found inboxes of this host not
	// yet declared on the broker (awaitDeclares); zero: none pending
	declaresSince time.Time
	declaresLate  bool // the wait ran out: logged once, the outbox goes on
}

// declaresWait bounds how long the outbox waits for the broker side of
// this host's inboxes: a declare the broker keeps refusing must not wedge
// what the outbox holds for everyone else.
const declaresWait = 10 * time.Second

// awaitDeclares says whether the pump should hold the outbox back because
// an inbox made on this host during an outage is not on the broker yet:
// a message the outbox holds may be answered into it at once (a question
// to another host gets its NO_WAITER there), and the broker drops what no
// queue takes — the asker would never hear. The attacher declares them
// once the broker is back; the pump goes on when it has, or declaresWait
// after it first waited with the link up (the wait starts again after
// each outage: time spent while the link is down is not waiting for the
// attacher).
func (t *Transport) awaitDeclares(st *pumpState) bool {
	if t.declaresDone() || !t.remote.Connected() {
		st.declaresSince, st.declaresLate = time.Time{}, false
		return !t.declaresDone() // link down: nothing goes out anyway
	}
	now := time.Now()
	if st.declaresSince.IsZero() {
		st.declaresSince = now
	}
	if now.Sub(st.declaresSince) < declaresWait {
		return true
	}
	if !st.declaresLate {
		st.declaresLate = true
		t.log.Warn("publishing the outbox before every inbox of this host is declared on the broker: a notice into one not yet declared is dead-lettered", "waited", declaresWait)
	}
	return false
}

// pump publishes the outbox, oldest first, in windows of pumpBatch, and
// removes messages only after the broker confirmed them. A crash between
// a confirm and the removal publishes the message again after the
// restart: the receiving gateway's msgId de-duplication drops the copy.
func (t *Transport) pump() {
	defer t.wg.Done()
	var st pumpState
	for {
		batch, err := t.local.OutboxPeek(pumpBatch)
		switch {
		case errors.Is(err, bridge.ErrClosed):
			return
		case err != nil:
			t.log.Error("reading the outbox failed; retrying", "err", err)
		case len(batch) == 0:
			select {
			case <-t.wake:
				continue
			case <-t.stop:
				return
			}
		default:
			if t.awaitDeclares(&st) {
				break // the attacher declares them meanwhile
			}
			if t.publishBatch(batch, &st) {
				continue
			}
		}
		select {
		case <-t.stop:
			return
		case <-time.After(t.opts.RetryEvery):
		}
	}
}

// publishBatch publishes batch in order until one cannot go now, removes
// what is out (or given up) and reports whether all of it was.
func (t *Transport) publishBatch(batch []*embedded.Spooled, st *pumpState) bool {
	rp, ok := t.remote.(bridge.RunPublisher)
	if !ok || st.alone {
		batch = batch[:1]
	}
	outs, reasons := t.publishWindow(batch, rp, st)
	n := len(outs)
	if n > 0 && !t.drop(batch[:n], reasons) {
		return false
	}
	return n == len(batch)
}

// publishWindow publishes batch (one run on rp, or its one message alone)
// and judges it in order: outs is the prefix that can leave the outbox,
// reasons says why for each one given up.
//
// Order. A run is written in outbox order on one channel, and only its
// confirmed prefix leaves the outbox: from the first message the broker
// did not settle (i) the whole rest is published again, i first. Most
// often (a lost link, a node that stopped confirming) none of i's
// successors was enqueued either, and the receiver sees the outbox's
// order. But a quorum inbox between leaders may nack i and take i+1: the
// receiver then sees i+1 before i — one inversion within a window, which
// the one-at-a-time pump did not make — and i+1 again after i; that copy
// (same msgId) is refused as replayed by the receiving gateway's msgId
// de-duplication, so nothing arrives twice. The inversion is bounded to
// the messages of that window the broker took past i.
func (t *Transport) publishWindow(batch []*embedded.Spooled, rp bridge.RunPublisher, st *pumpState) (outs []bool, reasons []string) {
	results := t.publishRun(batch, rp)
	for i, s := range batch {
		out, reason := t.judge(s, results[i], &st.refusals)
		if !out {
			// stopped short while the broker is up: not an outage, so the
			// head goes alone next, where a refusal is counted
			st.alone = t.remote.Connected()
			return outs, reasons
		}
		outs, reasons = append(outs, true), append(reasons, reason)
	}
	st.alone = false
	return outs, reasons
}

// What the pump decided about a message without publishing it.
var (
	errUndecodable = errors.New("the outbox record does not decode")
	errExpired     = errors.New("expired in the outbox")
	errLinkDown    = fmt.Errorf("%w: not published: the link is down", bridge.ErrUnavailable)
)

// publishRun publishes batch's live messages — as one run on rp, or the
// one alone — and returns each message's result, in batch's order.
// Expiry is decided here, once, before the publish: a message published
// is never then reported expired.
func (t *Transport) publishRun(batch []*embedded.Spooled, rp bridge.RunPublisher) []error {
	results := make([]error, len(batch))
	var run []bridge.Outgoing
	var at []int
	for i, s := range batch {
		switch {
		case s.Env == nil:
			results[i] = errUndecodable
		case !t.opts.Now().Before(s.Env.ExpiresAt):
			results[i] = errExpired
		default:
			run, at = append(run, bridge.Outgoing{Key: s.Key, Env: s.Env, Mandatory: s.Mandatory}), append(at, i)
		}
	}
	if len(run) == 0 {
		return results
	}
	errs := []error{errLinkDown}
	if t.remote.Connected() {
		ctx, cancel := t.pumpContext()
		if rp != nil && len(run) > 1 {
			errs = rp.PublishRun(ctx, run)
		} else {
			errs[0] = t.remote.Publish(ctx, run[0].Key, run[0].Env, run[0].Mandatory)
		}
		cancel()
	}
	for k, i := range at {
		results[i] = errLinkDown
		if k < len(errs) {
			results[i] = errs[k]
		}
	}
	return results
}

// pumpContext bounds a publish of the pump by Bound and by Close.
func (t *Transport) pumpContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Bound)
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// judge reads s's result err. out: it can leave the outbox (published,
// or given up: then reason says why); false: try again later.
func (t *Transport) judge(s *embedded.Spooled, err error, refusals *int) (out bool, reason string) {
	switch {
	case errors.Is(err, errUndecodable):
		t.log.Error("an outbox record does not decode: removed", "seq", s.Seq, "err", s.Err)
		return true, ""
	case errors.Is(err, errExpired):
		return true, "expired in " + t.opts.Host + "'s outbox while the broker was unreachable"
	case err == nil:
		*refusals = 0
		return true, ""
	case errors.Is(err, bridge.ErrUnroutable):
		return true, "published from " + t.opts.Host + "'s outbox after a broker outage, but no inbox takes it: its recipient is gone"
	case errors.Is(err, bridge.ErrInboxFull):
		return true, "published from " + t.opts.Host + "'s outbox after a broker outage, but the recipient's inbox is full"
	case errors.Is(err, bridge.ErrClosed), errors.Is(err, bridge.ErrUnavailable), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled), !t.remote.Connected():
		return false, ""
	}
	if *refusals++; *refusals < maxRefusals {
		t.log.Warn("the broker refused a message from the outbox; retrying", bridge.LogMsgID, s.Env.MsgID, bridge.LogTraceID, s.Env.TraceID, "err", err)
		return false, ""
	}
	*refusals = 0
	return true, "the broker refused it after a broker outage: " + err.Error()
}

// drop removes done from the outbox; a non-empty reason reports that
// message undeliverable.
func (t *Transport) drop(done []*embedded.Spooled, reasons []string) bool {
	seqs := make([]uint64, len(done))
	for i, s := range done {
		seqs[i] = s.Seq
	}
	if err := t.local.Unspool(seqs...); err != nil {
		t.log.Error("removing messages from the outbox failed", "messages", len(seqs), "err", err)
		return false
	}
	t.mu.Lock()
	t.spooled -= len(done)
	n, report := t.spooled, t.undeliverable
	t.mu.Unlock()
	for i, s := range done {
		if reasons[i] == "" || s.Env == nil {
			continue
		}
		t.log.Warn("a message from the outbox is undeliverable", bridge.LogMsgID, s.Env.MsgID, bridge.LogTraceID, s.Env.TraceID, "kind", s.Env.Kind, "from", s.Env.From, "to", s.Key, "reason", reasons[i])
		if report != nil {
			report(s.Env, reasons[i])
		}
	}
	if n == 0 {
		t.log.Info("outbox empty: messages for other hosts go straight to the broker again")
	}
	return true
}
