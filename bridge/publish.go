package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// newEnv fills the common envelope fields.
func (c *Core) newEnv(kind Kind, from, to string, body []byte, ttl time.Duration) *Envelope {
	now := c.cfg.Now()
	return &Envelope{
		V: Version, Kind: kind, MsgID: uuid.NewString(), From: from, To: to, Host: c.cfg.Host,
		TS: now, ExpiresAt: now.Add(ttl), Body: body,
	}
}

// publish signs env, publishes it and observes the outcome. A message the
// transport spooled (ErrSpooled: its broker is unreachable) counts as
// published: it is durable at this gateway and goes out when the broker
// returns.
func (c *Core) publish(ctx context.Context, key string, env *Envelope, mandatory bool) error {
	_, err := c.publishSpool(ctx, key, env, mandatory)
	return err
}

// publishSpool is publish that also says whether the message was spooled,
// for the calls whose result tells the caller so.
func (c *Core) publishSpool(ctx context.Context, key string, env *Envelope, mandatory bool) (spooled bool, err error) {
	if err := c.recordIntent(ctx, env); err != nil { // a request id not durable: nothing goes out
		c.observeEnv(HopPublish, env, key, "publish failed: "+err.Error())
		return false, err
	}
	wire, err := c.sealAndSign(env) // env stays clear: the history and request book keep it
	if err != nil {
		c.observeEnv(HopPublish, env, key, "publish failed: "+err.Error())
		return false, err
	}
	err = c.tr.Publish(ctx, key, wire, mandatory)
	switch {
	case errors.Is(err, ErrSpooled):
		c.observeEnv(HopPublish, env, key, "spooled: the broker is unreachable, published when it returns")
		c.log.Info("spooled: the broker is unreachable", LogKind, env.Kind, LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogTo, key)
		spooled = true
	case err != nil:
		c.observeEnv(HopPublish, env, key, publishFailedStatus(env, err))
		return false, err
	default:
		c.observeEnv(HopPublish, env, key, "published")
	}
	c.publishedFor(ctx, env)
	c.recordOut(env)
	c.notePeers(env)
	return spooled, nil
}

// Undeliverable reports that env, which the transport spooled while its
// broker was unreachable (the sender was answered "queued"), can no longer
// be delivered — it expired waiting, or the broker refused it once back.
// Like every undelivered message it goes through fate.go, once: a line in
// the dead-letter log, and for a brief, reply, ask or answer FAILED to its
// sender (corr = its msgId) with reason; receipts and notices are logged
// only (nobody awaits them).
func (c *Core) Undeliverable(env *Envelope, reason string) {
	if env == nil || env.Host != c.cfg.Host {
		return
	}
	if failedKinds[env.Kind] {
		c.ledger.settle(env.MsgID) // a brief into a pane: this FAILED is its receipt
	}
	c.reportUndelivered([]undelivered{undeliveredEnv(env, env.To, "outbox of "+c.cfg.Host, "undeliverable", "not delivered: "+reason)})
}

// outMsg is a publish decided under a lock and done after it.
type outMsg struct {
	env *Envelope
}

// publishAll publishes notices decided under a lock, mandatory, and
// returns how many failed. One no inbox takes is logged and recorded
// (noticelost.go); one the transport cannot take now is kept and published
// again by the sweeper (noticeretry.go): the caller (a delivery handler)
// cannot do better, and a notice dropped here is never heard.
func (c *Core) publishAll(out []outMsg) (failed int) {
	for _, o := range out {
		err := c.publishNotice(o)
		if errors.Is(err, ErrUnroutable) || (err != nil && !c.keepNotice(o.env, err)) {
			failed++
		}
	}
	return failed
}

// publishNotice publishes one notice, mandatory; one no inbox takes is
// logged and recorded here (noticelost.go), the caller decides the rest.
func (c *Core) publishNotice(o outMsg) error {
	// not tied to c.ctx: a receipt decided while the core shuts down still
	// goes out (the transport closes after the core)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.publish(ctx, o.env.To, o.env, true)
	if errors.Is(err, ErrUnroutable) {
		c.noticeUnroutable(o.env, err)
	}
	return err
}

// notice builds a notice — INJECTED, FAILED, NO_WAITER, TOO_LATE or
// ABANDONED — from entity from to entity to about the message corr.
func (c *Core) notice(kind Kind, from, to, corr, turnID, traceID, reason string) outMsg {
	e := c.newEnv(kind, from, to, []byte(reason), c.cfg.MessageTTL)
	e.Corr, e.TurnID, e.TraceID = corr, turnID, traceID
	return outMsg{env: e}
}

// noticeFor is the notice from entity from answering env: to its sender,
// about it, in its turn and trace.
func (c *Core) noticeFor(kind Kind, from string, env *Envelope, reason string) outMsg {
	return c.notice(kind, from, env.From, env.MsgID, env.TurnID, env.TraceID, reason)
}

// receiptFor is the receipt from entity from about env, a brief or message
// outside any turn: to its sender, about it, in its trace.
func (c *Core) receiptFor(kind Kind, from string, env *Envelope, reason string) outMsg {
	return c.notice(kind, from, env.From, env.MsgID, "", env.TraceID, reason)
}

// publishErr is the error a caller is told when its message could not be
// published to target.
func (c *Core) publishErr(err error, target Entity) error {
	switch {
	case errors.Is(err, ErrUnroutable):
		return userErr("no inbox for %s: not registered or offline", target.Addr())
	case errors.Is(err, ErrInboxFull):
		return userErr("inbox of %s is full (%d messages unread): it must drain before it can take more", target.Addr(), c.cfg.InboxMaxLength)
	case errors.Is(err, ErrUnavailable):
		return userErr("message to %s: %v; send it again once the broker is back", target.Addr(), err)
	}
	return fmt.Errorf("bridge: publish: %w", err)
}
