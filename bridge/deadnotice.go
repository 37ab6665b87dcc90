package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Dead letters of another host. bridge.dlq is one queue every gateway
// consumes in turn, so a message that died in any inbox reaches whichever
// gateway's consumer is next — usually not its sender's. That gateway
// cannot vouch for the message (the queue is writable by anyone on the
// broker, x-death headers are whatever a publisher wrote), but the
// sender's gateway can: it signed it. So the consumer forwards a
// DEAD_LETTER notice to the sender's host's durable control queue, signed
// as itself and carrying the original signed envelope; the sender's
// gateway checks its own signature, its own entity, its own expiry, and
// reports it once (reportableDeadLetter), as if it had consumed it itself.
// A sender host that is down finds the notice in its control queue when it
// is back. No queue changes shape, so gateways of every age keep running
// on the same broker during an upgrade: a host whose heartbeat shows a
// gateway older than this (no DeadLetterNotices) is told the old way, by a
// FAILED straight into its sender's inbox (deadLetterFallback).

// DeadLetterNotice is the body of a DEAD_LETTER: why and where the message
// died, and the message itself as its sender signed it.
type DeadLetterNotice struct {
	Reason   string       `json:"reason"`
	Queue    string       `json:"queue,omitempty"`
	At       int64        `json:"at"` // Unix ms, when the forwarding gateway consumed it
	Envelope WireEnvelope `json:"envelope"`
}

// WireEnvelope is an envelope in JSON: every signed field, the signature
// and the body (both base64, so any body fits in a bounded size).
type WireEnvelope struct {
	V         int    `json:"v"`
	Kind      Kind   `json:"kind"`
	MsgID     string `json:"msgId"`
	TraceID   string `json:"traceId,omitempty"`
	From      string `json:"from"`
	To        string `json:"to"`
	Host      string `json:"host"`
	Corr      string `json:"corr,omitempty"`
	TurnID    string `json:"turnId,omitempty"`
	SpawnID   string `json:"spawnId,omitempty"`
	Priority  string `json:"priority,omitempty"`
	Seal      string `json:"seal,omitempty"`
	SealKey   string `json:"sealKey,omitempty"`
	TS        int64  `json:"ts"`
	ExpiresAt int64  `json:"expiresAt"`
	Sig       []byte `json:"sig,omitempty"`
	Body      []byte `json:"body"`
}

// NoticeOf is the DEAD_LETTER body about dl, whose envelope is e.
func NoticeOf(dl DeadLetter, e *Envelope) DeadLetterNotice {
	return DeadLetterNotice{Reason: dl.Reason, Queue: dl.Queue, At: dl.At.UnixMilli(), Envelope: wireOf(e)}
}

func wireOf(e *Envelope) WireEnvelope {
	return WireEnvelope{V: e.V, Kind: e.Kind, MsgID: e.MsgID, TraceID: e.TraceID, From: e.From, To: e.To, Host: e.Host,
		Corr: e.Corr, TurnID: e.TurnID, SpawnID: e.SpawnID, Priority: e.Priority, Seal: e.Seal, SealKey: e.SealKey,
		TS: e.TS.UnixMilli(), ExpiresAt: e.ExpiresAt.UnixMilli(), Sig: e.Sig, Body: e.Body}
}

// ParseDeadLetterNotice decodes a DEAD_LETTER body from the wire (untrusted:
// any trusted gateway may have written it) and validates the envelope it
// carries as FromHeaders would.
func ParseDeadLetterNotice(raw []byte) (DeadLetterNotice, *Envelope, error) {
	var n DeadLetterNotice
	if err := json.Unmarshal(raw, &n); err != nil {
		return n, nil, malformed("dead-letter notice: %v", err)
	}
	if n.Reason == "" || len(n.Reason) > 256 || len(n.Queue) > 256 {
		return n, nil, malformed("dead-letter notice: reason or queue missing or too long")
	}
	w := n.Envelope
	const maxMS = 1 << 46 // as FromHeaders
	if w.TS <= 0 || w.TS > maxMS || w.ExpiresAt <= 0 || w.ExpiresAt > maxMS {
		return n, nil, malformed("dead-letter notice: ts/expiresAt out of range")
	}
	e := &Envelope{V: w.V, Kind: w.Kind, MsgID: w.MsgID, TraceID: w.TraceID, From: w.From, To: w.To, Host: w.Host,
		Corr: w.Corr, TurnID: w.TurnID, SpawnID: w.SpawnID, Priority: w.Priority, Seal: w.Seal, SealKey: w.SealKey,
		TS: time.UnixMilli(w.TS), ExpiresAt: time.UnixMilli(w.ExpiresAt), Sig: w.Sig, Body: w.Body}
	if e.Body == nil {
		e.Body = []byte{}
	}
	if err := e.Validate(); err != nil {
		return n, nil, err
	}
	return n, e, nil
}

// deadLetterVouched reports whether a dead letter of another host's is
// worth a word to that host: a kind whose sender hears FAILED, dead by
// the broker's own expiry, past its own expiresAt (a broker TTL cannot
// fire before it), signed under its host's trusted key. The sender's
// gateway checks all of it again; this only keeps a forged or replayed
// one from costing it a message.
func (c *Core) deadLetterVouched(e *Envelope, reason string) bool {
	if !failedKinds[e.Kind] || reason != ReasonExpired || c.cfg.Now().Before(e.ExpiresAt) {
		return false
	}
	return len(e.Sig) > 0 && c.cfg.Verifier.Verify(e.Host, e.SigningInput(), e.Sig) == nil
}

// forwardDeadLetter tells e's host about a dead letter this gateway
// consumed: a DEAD_LETTER on its control queue, or, when that host is
// known to run a gateway older than the notice (or has no control queue),
// the old way (deadLetterFallback). It returns the host when the notice
// went out, "" when the fallback was used, errForwardLater when the
// broker could not be reached (nothing was reported: try again later).
func (c *Core) forwardDeadLetter(dl DeadLetter, e *Envelope) (forwardedTo string, reported bool, err error) {
	if c.mem.has(fateKey(e.To, e.MsgID)) { // reported the old way already, its ack lost
		return "", false, nil
	}
	ct, ok := c.tr.(ControlTransport)
	if !ok || !c.takesDeadLetterNotices(e.Host) {
		return "", c.deadLetterFallback(dl, e, "its gateway is older than dead-letter notices"), nil
	}
	raw, err := json.Marshal(NoticeOf(dl, e))
	if err != nil || len(raw) > MaxBodyBytes {
		return "", c.deadLetterFallback(dl, e, "the message is too large for a notice"), nil
	}
	n := c.newEnv(KindDeadLetter, GatewayGID(c.cfg.Host), "control."+e.Host, raw, c.cfg.MessageTTL)
	n.Corr, n.TraceID = e.MsgID, e.TraceID
	c.sign(n)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.cfg.MaxWait)
	defer cancel()
	if err := ct.PublishControl(ctx, e.Host, n); err != nil {
		c.observeEnv(HopPublish, n, e.Host, "publish failed: "+err.Error())
		if linkDown(err) {
			return "", false, errForwardLater
		}
		why := "its control queue refused the notice: " + err.Error()
		if errors.Is(err, ErrUnroutable) {
			why = "it has no control queue on this broker"
		}
		return "", c.deadLetterFallback(dl, e, why), nil
	}
	c.observeEnv(HopPublish, n, e.Host, "published")
	c.log.Info("dead letter forwarded to its sender's host", LogMsgID, e.MsgID, LogTraceID, e.TraceID, "host", e.Host, "notice", n.MsgID)
	return e.Host, false, nil
}

// errForwardLater is a notice the broker did not take because the link is
// down: the dead letter stays unsettled and comes back (to this gateway or
// another) once the broker is reachable — a report sent another way now
// could be followed by the notice later, and the sender would hear twice.
var errForwardLater = errors.New("bridge: the broker is unreachable: the dead letter is forwarded once it is back")

// linkDown reports whether a publish failed for want of a broker (it
// waited DownWait for one, or the transport is closing), not because the
// broker refused it. A link lost under the publish is neither: the
// fallback reports it, and marks it, so that it is not forwarded again
// when it comes back.
func linkDown(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClosed) || errors.Is(err, context.DeadlineExceeded)
}

// takesDeadLetterNotices reports whether host's gateway understands a
// DEAD_LETTER. A host not heard from (down, or not yet heard since this
// gateway started) gets the notice: it waits in its durable control queue.
func (c *Core) takesDeadLetterNotices(host string) bool {
	h := c.pres.host(host)
	return h == nil || h.p.DeadLetterNotices
}

// deadLetterFallback reports a dead letter of another host's straight to
// its sender, from this gateway (a FAILED any gateway's entity accepts),
// once per msgId at this gateway: the way that reaches a gateway older
// than the notice. why is logged: it says why the notice was not used.
func (c *Core) deadLetterFallback(dl DeadLetter, e *Envelope, why string) bool {
	if !c.mem.mark(fateKey(e.To, e.MsgID), c.cfg.Now().Add(c.cfg.MessageTTL)) {
		return false
	}
	c.log.Warn("dead letter reported to its sender directly", LogMsgID, e.MsgID, LogTraceID, e.TraceID, "host", e.Host, LogReason, why)
	c.publishAll([]outMsg{c.deadLetterFailed(e, dl.Reason, dl.Queue)})
	return true
}

// deadLetterFailed is the FAILED that tells e's sender its message died.
func (c *Core) deadLetterFailed(e *Envelope, reason, queue string) outMsg {
	return c.receiptFor(KindFailed, GatewayGID(c.cfg.Host), e, "dead-lettered ("+reason+") from "+queue)
}

// runDeadLetterNotice handles a DEAD_LETTER another gateway forwarded:
// the dead letter is this host's when its own checks say so
// (reportableDeadLetter: its signature, its entity, past its expiry, not
// reported before), and then reported and written to the dead-letter log
// here, exactly as one consumed here. Anything else is logged and dropped:
// the forwarder's word alone makes this gateway write to nobody.
func (c *Core) runDeadLetterNotice(d Delivery) {
	defer c.wg.Done()
	env := d.Env
	n, orig, err := ParseDeadLetterNotice(env.Body) // checked by admitControl
	switch {
	case err != nil:
	case orig.MsgID != env.Corr || orig.Host != c.cfg.Host:
		err = errors.New("it names a message of another host, or another message than its corr")
	case !failedKinds[orig.Kind] || n.Reason != ReasonExpired:
		err = errors.New("a " + string(orig.Kind) + " dead-lettered (" + n.Reason + ") is not reported")
	case !c.reportableDeadLetter(orig):
		err = errors.New("not this host's to report, or reported already")
	}
	if err != nil {
		c.log.Warn("dead-letter notice not reported", LogMsgID, env.Corr, "from", env.Host, "notice", env.MsgID, LogReason, err.Error())
	} else {
		dl := DeadLetter{Env: orig, MsgID: orig.MsgID, Reason: n.Reason, Queue: n.Queue, At: time.UnixMilli(n.At)}
		c.recordDeadLetter(dl, deadFate{reported: true, consumedBy: env.Host})
		c.publishAll([]outMsg{c.deadLetterFailed(orig, n.Reason, n.Queue)})
	}
	c.mem.markEnv("control:"+env.MsgID, env)
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("dead-letter notice ack failed", LogMsgID, env.Corr, "notice", env.MsgID, "err", err)
	}
}
