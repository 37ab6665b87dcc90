package bridge

import (
	"errors"
)

// Fates (issue 20). A message the fabric accepted ends in exactly one fate
// its sender can see: delivered — its recipient has it (a drain handed over
// and acked, a reply resolving an open send, a brief typed into its pane) —
// or reported: its sender is told FAILED with the reason, corr its msgId,
// and the dead-letter log has a line for it. reportUndelivered is the one
// place a message that will not reach its recipient is reported, whatever
// ended it: its recipient stopped, reaped, removed or gone with its pane
// (removal.go), an arrival for an entity that is gone, a claimed message
// given back after its recipient went. It de-duplicates by recipient and
// msgId, so a copy that a crash or a consumer bounce brings back is reported
// once; and a caller acks a message in its transport only after this
// returned, so no message leaves a transport before its fate is written.
// The one other place that tells a sender FAILED is the dead-letter
// consumer (deadletter.go, deadnotice.go): a dead letter may be consumed
// on any host, so it is reported on the sender's host after checks of its
// own — under the same once key (fateKey).

// fateKey is the seen-set key that says a message to recipient was
// reported: shared by reportUndelivered and the dead-letter paths
// (deadletter.go, deadnotice.go), which report a message the broker
// expired, so no message is reported by both.
func fateKey(recipient, msgID string) string { return "fate:" + recipient + msgID }

// undelivered is one message that will not reach its recipient.
type undelivered struct {
	msgID, traceID, from string
	kind                 Kind
	to                   string // the recipient's gid
	queue                string // where it waited, for the dead-letter log
	cause                string // stopped | reaped | removed | pane closed | gone
	reason               string // the sentence its sender reads
	notifier             string // whom the FAILED is from; "" is this gateway
	failedID             string // the FAILED's msgId when it is derived (a repeat of it is a copy); "" is a new one
}

// undeliveredHeld describes a held message by its head (its body is not
// needed to report it).
func undeliveredHeld(hm *heldMsg, to, queue, cause, reason string) undelivered {
	return undelivered{msgID: hm.head.msgID(), traceID: hm.head.traceID(), from: hm.head.from, kind: hm.head.kind,
		to: to, queue: queue, cause: cause, reason: reason}
}

// undeliveredEnv describes an arrival.
func undeliveredEnv(env *Envelope, to, queue, cause, reason string) undelivered {
	return undelivered{msgID: env.MsgID, traceID: env.TraceID, from: env.From, kind: env.Kind,
		to: to, queue: queue, cause: cause, reason: reason}
}

// reportUndelivered records each of us in the dead-letter log (one write
// for all) and tells the sender of each brief, reply, ask or answer FAILED
// from this gateway. Broadcast copies and receipts are logged only: a
// broadcast has many recipients, and a receipt about a receipt would loop.
// A message reported before is skipped. It returns how many senders were
// told. Its callers cannot keep the message for a second report (an
// expiry, a spooled message that cannot go out), so a FAILED that could
// not be published is kept by the core instead and retried by the sweeper
// (keepNotice); a caller that can keep the message uses reportOrKeep.
func (c *Core) reportUndelivered(us []undelivered) int {
	told, _ := c.report(us, false)
	return told
}

// reportOrKeep is reportUndelivered for a caller that keeps what it could
// not report (see report).
func (c *Core) reportOrKeep(us []undelivered) (told int, unsent map[string]bool) {
	return c.report(us, true)
}

// report is reportUndelivered that, with canKeep, also returns the msgIds whose
// FAILED could not be published (a kill or a broker cut took the link):
// those are not recorded as reported — a second dead-letter line says
// their sender was not told — so a later copy is reported again, and a
// caller must keep them (not ack them, not delete them) so that one comes:
// the next start, or the consumer a removal restarts, brings them back.
// The once key is persisted only after the FAILED is out (issue 20: a
// restart found a message "reported" that its sender never heard of). The
// dead-letter line is written first, so a sender that hears FAILED finds it.
func (c *Core) report(us []undelivered, canKeep bool) (told int, unsent map[string]bool) {
	now, exp := c.cfg.Now(), c.cfg.Now().Add(c.cfg.MessageTTL)
	var recs []DeadLetterRecord
	var tells []toTell
	for _, u := range us {
		key := fateKey(u.to, u.msgID)
		if !c.mem.take(key) {
			continue // reported before (or being reported): one fate, one report
		}
		tell := failedKinds[u.kind] && u.from != ""
		recs = append(recs, DeadLetterRecord{At: now, MsgID: u.msgID, TraceID: u.traceID, Kind: string(u.kind), From: u.from, To: u.to,
			Reason: u.cause + ": " + u.reason, Queue: u.queue, Reported: tell})
		if !tell {
			c.mem.keep(key, exp)
			continue
		}
		from := u.notifier
		if from == "" {
			from = GatewayGID(c.cfg.Host)
		}
		o := c.notice(KindFailed, from, u.from, u.msgID, "", u.traceID, u.reason)
		if u.failedID != "" {
			o.env.MsgID = u.failedID
		}
		tells = append(tells, toTell{o, len(recs) - 1})
	}
	c.writeDead(recs)
	var notTold []DeadLetterRecord
	for _, t := range tells {
		rec := recs[t.rec]
		key := fateKey(rec.To, rec.MsgID)
		if c.tellSender(t.o, canKeep) {
			c.mem.keep(key, exp)
			told++
			continue
		}
		c.mem.forget(key)
		if unsent == nil {
			unsent = map[string]bool{}
		}
		unsent[rec.MsgID] = true
		rec.Reported, rec.Reason = false, rec.Reason+" (its FAILED could not be published: it is reported again when the message comes back)"
		notTold = append(notTold, rec)
	}
	c.writeDead(notTold)
	return told, unsent
}

// toTell is a FAILED reportOrKeep publishes and its dead-letter record.
type toTell struct {
	o   outMsg
	rec int // index in the records written
}

// tellSender publishes one FAILED of report; false means it may be
// published later and was not. An unroutable one (its sender's inbox is
// gone: nobody is left to tell) is final, logged and counted. A FAILED
// that cannot go out now is kept for the sweeper's retry (keepNotice),
// which counts as told unless the retry buffer is full — except, with
// canKeep, when the transport is closed: then no sweeper will run before
// the next start, and the caller keeps the message so that start reports
// it (a removal that waited for a restart on a full disk never ended).
func (c *Core) tellSender(o outMsg, canKeep bool) bool {
	err := c.publishNotice(o)
	switch {
	case err == nil, errors.Is(err, ErrUnroutable): // unroutable: logged and counted, final
		return true
	case !canKeep || !errors.Is(err, ErrClosed):
		// nobody keeps the message, or the transport is still there (a
		// full disk, a bounded outage): the core retries the FAILED (its
		// sweeper) and the message's fate is settled now; only a closed
		// transport (a kill, a stop) leaves the message for the next start
		return c.keepNotice(o.env, err)
	}
	c.log.Warn("FAILED not published: not recorded as reported, the message is kept to be reported again", LogMsgID, o.env.MsgID,
		LogTraceID, o.env.TraceID, "corr", o.env.Corr, LogTo, o.env.To, "err", err)
	return false
}

// deadBacklogMax bounds the dead-letter records kept in memory while the
// store refuses them (a full disk): about 300 bytes each.
const deadBacklogMax = 10000

// deadBacklog holds dead-letter records the store could not take, until
// the sweeper writes them (its lock is a leaf).
type deadBacklog struct {
	mu      leafMutex
	recs    []DeadLetterRecord
	dropped int // past deadBacklogMax: counted and logged, never silent
}

// writeDead writes recs to the dead-letter log; what the store refuses is
// kept and written again by the sweeper (flushDead), so a report made
// while the disk is full still gets its line once space returns.
func (c *Core) writeDead(recs []DeadLetterRecord) {
	if len(recs) == 0 {
		return
	}
	if err := c.st.AppendDeads(recs); err != nil {
		c.log.Error("dead-letter log write failed: kept in memory and written again", "n", len(recs), "err", err)
		c.deadLater.keep(recs)
	}
}

func (b *deadBacklog) keep(recs []DeadLetterRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := max(0, deadBacklogMax-len(b.recs))
	if len(recs) > room {
		b.dropped += len(recs) - room
		recs = recs[:room]
	}
	b.recs = append(b.recs, recs...)
}

func (b *deadBacklog) take() (recs []DeadLetterRecord, dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs, dropped = b.recs, b.dropped
	b.recs, b.dropped = nil, 0
	return recs, dropped
}

// flushDead writes what writeDead kept (the sweeper calls it).
func (c *Core) flushDead() {
	recs, dropped := c.deadLater.take()
	if dropped > 0 {
		c.log.Error("dead-letter records dropped: the store refused them and the backlog was full", "n", dropped)
	}
	if len(recs) == 0 {
		return
	}
	if err := c.st.AppendDeads(recs); err != nil {
		c.deadLater.keep(recs)
		return
	}
	c.log.Info("dead-letter records written after the store refused them", "n", len(recs))
}
