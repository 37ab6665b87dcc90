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

// pump publishes the outbox, oldest first, one confirmed publish at a time,
// and removes each message only after the broker confirmed it. A crash
// between the confirm and the removal publishes it again after the
// restart: the receiving gateway's msgId de-duplication drops the copy.
func (t *Transport) pump() {
	defer t.wg.Done()
	refusals := 0
	for {
		head, err := t.local.OutboxHead()
		switch {
		case errors.Is(err, bridge.ErrClosed):
			return
		case err != nil:
			t.log.Error("reading the outbox failed; retrying", "err", err)
		case head == nil:
			select {
			case <-t.wake:
				continue
			case <-t.stop:
				return
			}
		default:
			if t.publishHead(head, &refusals) {
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

// publishHead publishes s and removes it from the outbox once it is out
// (or given up); false means try again later.
func (t *Transport) publishHead(s *embedded.Spooled, refusals *int) bool {
	if s.Env == nil {
		t.log.Error("an outbox record does not decode: removed", "seq", s.Seq, "err", s.Err)
		return t.drop(s, "")
	}
	if !t.opts.Now().Before(s.Env.ExpiresAt) {
		return t.drop(s, "expired in "+t.opts.Host+"'s outbox while the broker was unreachable")
	}
	if !t.remote.Connected() {
		return false
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
		return t.drop(s, "")
	case errors.Is(err, bridge.ErrUnroutable):
		return t.drop(s, "published from "+t.opts.Host+"'s outbox after a broker outage, but no inbox takes it: its recipient is gone")
	case errors.Is(err, bridge.ErrInboxFull):
		return t.drop(s, "published from "+t.opts.Host+"'s outbox after a broker outage, but the recipient's inbox is full")
	case errors.Is(err, bridge.ErrClosed), errors.Is(err, bridge.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	}
	if *refusals++; *refusals < maxRefusals {
		t.log.Warn("the broker refused a message from the outbox; retrying", "msgId", s.Env.MsgID, "err", err)
		return false
	}
	*refusals = 0
	return t.drop(s, "the broker refused it after a broker outage: "+err.Error())
}

// drop removes s from the outbox; a reason reports it undeliverable.
func (t *Transport) drop(s *embedded.Spooled, reason string) bool {
	if err := t.local.Unspool(s.Seq); err != nil {
		t.log.Error("removing a message from the outbox failed", "seq", s.Seq, "err", err)
		return false
	}
	t.mu.Lock()
	t.spooled--
	n, report := t.spooled, t.undeliverable
	t.mu.Unlock()
	if reason != "" && s.Env != nil {
		t.log.Warn("a message from the outbox is undeliverable", "msgId", s.Env.MsgID, "kind", s.Env.Kind, "from", s.Env.From, "to", s.Key, "reason", reason)
		if report != nil {
			report(s.Env, reason)
		}
	}
	if n == 0 {
		t.log.Info("outbox empty: messages for other hosts go straight to the broker again")
	}
	return true
}
