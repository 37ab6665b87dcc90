package bridge

import "github.com/herdbridge/herdbridge/bridge/store"

// DeadLetterRecord is one line of `herdbridge dlq list`.
type DeadLetterRecord = store.DeadLetter

// onDeadLetter records a dead letter and reports it to its sender as FAILED
// (SPEC §4: nothing vanishes silently). Overflow is not reported again: the
// publisher was refused synchronously.
func (c *Core) onDeadLetter(dl DeadLetter) {
	rec := DeadLetterRecord{At: dl.At, MsgID: dl.MsgID, Reason: dl.Reason, Queue: dl.Queue}
	var out []outMsg
	if e := dl.Env; e != nil {
		rec.MsgID, rec.TraceID, rec.Kind, rec.From, rec.To = e.MsgID, e.TraceID, string(e.Kind), e.From, e.To
		// Only the broker's own expiry is reported here: a message that sat
		// unconsumed past its TTL (its gateway was gone). A refused one was
		// answered, if at all, by the gateway that refused it — a forged
		// message must not make us write to whoever it names — and an
		// over-cap one was refused to its publisher synchronously.
		if failedKinds[e.Kind] && dl.Reason == ReasonExpired && c.reportableDeadLetter(e) {
			out = append(out, c.receiptFor(KindFailed, GatewayGID(c.cfg.Host), e, "dead-lettered ("+dl.Reason+") from "+dl.Queue))
			rec.Reported = true
		}
	}
	ev := Event{Hop: HopDeadLetter, Kind: Kind(rec.Kind), MsgID: rec.MsgID, TraceID: rec.TraceID, From: rec.From, To: rec.To, Key: rec.Queue, Status: rec.Reason}
	if dl.Env != nil {
		ev.Corr, ev.Host = dl.Env.Corr, dl.Env.Host
	}
	c.observe(ev)
	c.log.Warn("dead letter", LogMsgID, rec.MsgID, LogTraceID, rec.TraceID, LogKind, rec.Kind, LogFrom, rec.From, LogTo, rec.To, LogReason, rec.Reason, "queue", rec.Queue)
	if err := c.st.AppendDead(rec); err != nil {
		c.log.Error("dead-letter log write failed", LogMsgID, rec.MsgID, LogTraceID, rec.TraceID, "err", err)
	}
	c.publishAll(out)
	if err := dl.Acker.Ack(); err != nil {
		c.log.Warn("dead letter ack failed", LogMsgID, rec.MsgID, LogTraceID, rec.TraceID, "err", err)
	}
}

// reportableDeadLetter decides whether a dead letter's sender is told. The
// dead-letter queue is writable by anyone on the broker and its x-death
// headers are whatever a publisher wrote, so across hosts only a message
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
	return c.mem.mark("dlq:"+e.MsgID, now.Add(c.cfg.MessageTTL))
}

// DeadLetters lists the dead letters this gateway consumed, newest last.
func (c *Core) DeadLetters(limit int) ([]DeadLetterRecord, error) { return c.st.DeadLetters(limit) }
