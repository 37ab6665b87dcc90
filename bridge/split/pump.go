package split

import (
	"context"
	"errors"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// maxRefusals is how many times in a row the pump retries a message the
// broker refuses for a reason other than being unreachable (a permission,
// a channel exception) before it gives it up and reports it: one such
// message must not wedge the outbox behind it.
const maxRefusals = 5

// pumpBatch is how many messages the pump publishes (each confirmed, in
// order) before it removes them from the outbox in one commit: one fsync
// per batch rather than per message.
const pumpBatch = 128

// pump publishes the outbox, oldest first, one confirmed publish at a time,
// and removes messages only after the broker confirmed them. A crash
// between a confirm and the removal publishes the message again after the
// restart: the receiving gateway's msgId de-duplication drops the copy.
func (t *Transport) pump() {
	defer t.wg.Done()
	refusals := 0
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
			if t.publishBatch(batch, &refusals) {
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
func (t *Transport) publishBatch(batch []*embedded.Spooled, refusals *int) bool {
	var done []*embedded.Spooled
	var reasons []string
	all := true
	for _, s := range batch {
		out, reason := t.publishOne(s, refusals)
		if !out {
			all = false
			break
		}
		done, reasons = append(done, s), append(reasons, reason)
	}
	if len(done) > 0 && !t.drop(done, reasons) {
		return false
	}
	return all
}

// publishOne publishes s. out: it can leave the outbox (published, or
// given up: then reason says why); false: try again later.
func (t *Transport) publishOne(s *embedded.Spooled, refusals *int) (out bool, reason string) {
	if s.Env == nil {
		t.log.Error("an outbox record does not decode: removed", "seq", s.Seq, "err", s.Err)
		return true, ""
	}
	if !t.opts.Now().Before(s.Env.ExpiresAt) {
		return true, "expired in " + t.opts.Host + "'s outbox while the broker was unreachable"
	}
	if !t.remote.Connected() {
		return false, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Bound)
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := t.remote.Publish(ctx, s.Key, s.Env, s.Mandatory)
	cancel()
	switch {
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
