package bridge

import "github.com/herdbridge/herdbridge/bridge/store"

// DeadLetterRecord is one line of `herdbridge dlq list`.
type DeadLetterRecord = store.DeadLetter

// deadFate is what became of one dead letter at this gateway: reported to
// its sender here, forwarded to its sender's host (deadnotice.go), and, for
// a notice, which host's gateway consumed it.
type deadFate struct {
	reported    bool
	forwardedTo string
	consumedBy  string
}

// onDeadLetter records a dead letter and sees that its sender hears of it
// as FAILED (SPEC §4: nothing vanishes silently), whichever host's
// gateway consumed it: one of this host's is reported here, another
// host's goes to that host (forwardDeadLetter). Only the broker's own
// expiry is reported: a message that sat unconsumed past its TTL (its
// gateway was gone). A refused one was answered, if at all, by the
// gateway that refused it — a forged message must not make us write to
// whoever it names — and an over-cap one was refused to its publisher
// synchronously.
func (c *Core) onDeadLetter(dl DeadLetter) {
	var fate deadFate
	var out []outMsg
	if e := dl.Env; e != nil && failedKinds[e.Kind] && dl.Reason == ReasonExpired {
		switch {
		case c.cfg.Verifier != nil && e.Host != c.cfg.Host:
			if c.deadLetterVouched(e, dl.Reason) {
				var err error
				if fate.forwardedTo, fate.reported, err = c.forwardDeadLetter(dl, e); err != nil {
					c.deadLetterLater(dl, err)
					return
				}
			}
		case c.reportableDeadLetter(e):
			out = append(out, c.deadLetterFailed(e, dl.Reason, dl.Queue))
			fate.reported = true
		}
	}
	c.recordDeadLetter(dl, fate)
	c.publishAll(out)
	if err := dl.Acker.Ack(); err != nil {
		c.log.Warn("dead letter ack failed", LogMsgID, dl.MsgID, "err", err)
	}
}

// deadLetterLater leaves dl for another try: requeued where the transport
// can (it comes back to some gateway's consumer), else unsettled (it comes
// back after the reconnect that the failure is waiting for).
func (c *Core) deadLetterLater(dl DeadLetter, why error) {
	c.log.Warn("dead letter not forwarded yet", LogMsgID, dl.MsgID, "err", why)
	if r, ok := dl.Acker.(interface{ Requeue() error }); ok {
		if err := r.Requeue(); err != nil {
			c.log.Debug("dead letter requeue failed (it comes back after the reconnect)", LogMsgID, dl.MsgID, "err", err)
		}
	}
}

// recordDeadLetter writes dl to the dead-letter log, the audit stream and
// the log.
func (c *Core) recordDeadLetter(dl DeadLetter, fate deadFate) {
	rec := DeadLetterRecord{At: dl.At, MsgID: dl.MsgID, Reason: dl.Reason, Queue: dl.Queue,
		Reported: fate.reported, ForwardedTo: fate.forwardedTo, ConsumedBy: fate.consumedBy}
	if e := dl.Env; e != nil {
		rec.MsgID, rec.TraceID, rec.Kind, rec.From, rec.To = e.MsgID, e.TraceID, string(e.Kind), e.From, e.To
	}
	ev := Event{Hop: HopDeadLetter, Kind: Kind(rec.Kind), MsgID: rec.MsgID, TraceID: rec.TraceID, From: rec.From, To: rec.To, Key: rec.Queue, Status: rec.Reason}
	if dl.Env != nil {
		ev.Corr, ev.Host = dl.Env.Corr, dl.Env.Host
	}
	c.observe(ev)
	c.log.Warn("dead letter", LogMsgID, rec.MsgID, LogTraceID, rec.TraceID, LogKind, rec.Kind, LogFrom, rec.From, LogTo, rec.To, LogReason, rec.Reason, "queue", rec.Queue,
		"reported", rec.Reported, "forwardedTo", rec.ForwardedTo, "consumedBy", rec.ConsumedBy)
	c.writeDead([]DeadLetterRecord{rec})
}

// reportableDeadLetter decides whether a dead letter's sender is told
// here. The dead-letter queue is writable by anyone on the broker and its
// x-death headers are whatever a publisher wrote (a DEAD_LETTER notice is
// only another gateway's word for them), so across hosts only a message
// this host published, signed by it, from one of its own entities, past its
// own expiry (a broker TTL cannot fire before it), is reported — and once.
func (c *Core) reportableDeadLetter(e *Envelope) bool {
	now := c.cfg.Now()
	if c.cfg.Verifier != nil && (e.Host != c.cfg.Host || now.Before(e.ExpiresAt) ||
		len(e.Sig) == 0 || c.cfg.Verifier.Verify(e.Host, e.SigningInput(), e.Sig) != nil) {
		return false
	}
	if c.cfg.Verifier != nil && c.reg.get(e.From) == nil {
		return false
	}
	return c.mem.mark(fateKey(e.To, e.MsgID), now.Add(c.cfg.MessageTTL))
}

// DeadLetters lists the dead letters this gateway consumed, newest last.
func (c *Core) DeadLetters(limit int) ([]DeadLetterRecord, error) { return c.st.DeadLetters(limit) }
