package bridge

import (
	"context"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// The pane runner: one goroutine per pane with a queue (panequeue.go), the
// one writer of its pane and of its queue's records. Round after round it
// settles the head: types it (typeHead), recovers it from the composer when
// it was typed and reported uncertain (panerecover.go), or fails it; then
// it sleeps until the pane's status changes, a brief arrives, or
// PaneRecheck passes.

// paneRunner is the one writer of pane: round after round it tries the
// head (settling it if it expired), and now and then settles whatever
// expired behind it; it sleeps when the head is not ready and ends when
// the queue is empty. A round reads one record, so a long queue costs
// nothing per brief typed: the whole queue is read at most once per
// expiryScanEvery.
func (c *Core) paneRunner(pane string) {
	defer c.wg.Done()
	var scanned time.Time
	var run paneRun
	for c.ctx.Err() == nil {
		r := c.queues.look(pane)
		if now := c.cfg.Now(); now.Sub(scanned) >= c.expiryScanEvery() {
			scanned = now
			c.expireQueued(pane)
		}
		head, ok, err := c.st.QueueHead(pane)
		if err != nil {
			c.log.Warn("cannot read a pane's queue", "pane", pane, "err", err)
		}
		if err == nil && !ok {
			if c.queues.done(pane) {
				return
			}
			continue
		}
		if err == nil && len(c.dropExpired([]store.QueuedBrief{head})) == 0 {
			continue // the head expired (or was unreadable): settled
		}
		if err == nil && c.tryHead(&run, head) {
			continue
		}
		t := time.NewTimer(c.cfg.PaneRecheck)
		select {
		case <-c.ctx.Done():
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
	c.queues.mu.Lock()
	delete(c.queues.runners, pane)
	c.queues.mu.Unlock()
}

// expiryScanEvery is how often a pane's runner reads its whole queue for
// briefs that expired behind the head (the head itself is judged every
// round): a brief expires a day after it was sent, so seconds of delay do
// not matter, and a long queue is not decoded on every round.
func (c *Core) expiryScanEvery() time.Duration { return 15 * c.cfg.PaneRecheck }

// tryHead tries the head of a pane's queue and reports whether it was
// settled (typed, failed, dropped): false means wait, the pane is not
// ready (or a brief typed earlier may still sit in its composer).
func (c *Core) tryHead(run *paneRun, r store.QueuedBrief) bool {
	if !r.Next && !r.Typed && c.queues.held(r.Pane, c.cfg.Now()) {
		return false // an interrupt's message is on its way: it goes first
	}
	q, ok := decodeQueued(r)
	if !ok {
		c.dequeue(r)
		return true
	}
	if c.mem.has(fateKey(q.To, q.env.MsgID)) {
		return c.dequeueTold(q.QueuedBrief)
	}
	e, live := c.workerOf(q)
	switch {
	case !live && q.Typed: // typed and reported (uncertain) before the pane went: nothing new to say
		c.discardBrief(q.env.MsgID)
		c.dequeue(q.QueuedBrief)
		return true
	case !live:
		return c.failQueued(q, "brief "+Excerpt(string(q.env.Body))+" not typed: "+c.departedName(q.To)+
			" left pane "+q.Pane+" (closed or removed) while the brief was queued")
	case q.Typed:
		return c.recoverHead(e, q)
	}
	settled := c.typeHead(run, e, q)
	if settled && q.Next {
		c.queues.release(q.Pane) // the interrupt's message is typed: the others may follow
	}
	return settled
}

// typeHead types q into e's pane, then tells the sender the rung observed
// (INJECTED) or FAILED; a pane not ready keeps it queued and tells the
// sender why. A brief reported uncertain stays at the head, typed: its
// text may sit in the composer (recoverHead).
func (c *Core) typeHead(run *paneRun, e Entity, q queued) bool {
	env := q.env
	// not tied to c.ctx: a graceful stop lets an inject in flight finish
	// (bounded) and send its receipt, instead of cutting it mid-typing
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.InjectWait)
	defer cancel()
	start := c.cfg.Now()
	rec := store.Await{MsgID: env.MsgID, From: env.From, To: e.GID, ToName: e.Name, TraceID: env.TraceID, Excerpt: Excerpt(string(env.Body))}
	typed := false
	r := c.cfg.Injector.Inject(ctx, Brief{To: e, Env: env, FromName: c.nameOf(env.From), Provenance: c.provenance(env), Typing: func() error {
		var typing *store.Await
		if env.Kind == KindSend {
			typing = &rec
		}
		err := c.st.MarkTyped(q.QueuedBrief, typing)
		if typed = err == nil; typed {
			c.workingOn(e.GID, env) // before the first byte: the agent may ask back at once
		}
		return err
	}})
	if r.Status == StatusNotReady && r.Waits == WaitsOwnDraft {
		return c.waitOwnDraft(run, e, q, r)
	}
	run.ownDraftSince = time.Time{}
	if r.Status == StatusNotReady {
		c.tellNotReady(q, r)
		return false
	}
	took := c.cfg.Now().Sub(start)
	c.log.Info("forward path", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "status", r.Status, LogReason, r.Reason, "ms", took.Milliseconds())
	c.observeFor(HopInject, e.GID, env, r.Status, took)
	stuck := typed && r.Status == StatusUncertain
	switch {
	case stuck: // own-draft recovery spaces its Enters from this one
		q.Typed, q.EnterAt = true, c.cfg.Now()
		if err := c.st.UpdateQueued(q.QueuedBrief); err != nil {
			c.log.Warn("cannot record when a brief was typed", LogMsgID, env.MsgID, LogTraceID, env.TraceID, "err", err)
		}
	case typed:
		c.typedInto(q.Pane, env.MsgID) // the agent reads a large brief's file during its turn
		c.settledHead(q)
	case r.Status == StatusFailed || r.Status == "": // not typed: reported like any undelivered message, with its dead-letter record
		c.settleQueued(q, KindFailed, "brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: "+r.Reason)
		return true
	default:
		c.discardBrief(env.MsgID)
		c.settledHead(q)
	}
	if env.Kind == KindSend && c.publishAll([]outMsg{c.injectReceipt(e, env, r)}) == 0 && typed {
		if err := c.st.DeleteTyping(env.MsgID); err != nil {
			c.log.Warn("cannot forget a typed brief", LogMsgID, env.MsgID, LogTraceID, env.TraceID, "err", err)
		}
	} // else the receipt did not go out: the typing record stays, and a restart reports it uncertain
	return !stuck
}

// tellNotReady tells q's sender its brief is queued, and why: at first,
// and again when the pane turns to a dialog or a draft (something the
// sender may want to act on).
func (c *Core) tellNotReady(q queued, r InjectReceipt) {
	if q.env.Kind != KindSend || q.Told == r.Waits {
		return
	}
	if q.Told != "" && r.Waits != WaitsDraft && r.Waits != WaitsOwnDraft && r.Waits != WaitsDialog {
		return
	}
	c.tellQueued(q, r.Waits, r.Reason, 1)
}

// injectReceipt is the INJECTED (its body the rung observed) or FAILED
// that tells the sender how its brief landed.
func (c *Core) injectReceipt(e Entity, env *Envelope, r InjectReceipt) outMsg {
	if r.Status == StatusFailed || r.Status == "" {
		return c.receiptFor(KindFailed, e.GID, env, "brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: "+r.Reason)
	}
	reason := r.Status
	if r.Reason != "" {
		reason += ": " + r.Reason
	}
	return c.receiptFor(KindInjected, e.GID, env, reason)
}

// workingOn records env, a SEND just typed into gid's pane, as the brief
// the worker works on: the default target of its bridge_ask, and whose
// sender hears ABANDONED if the worker goes away before replying.
func (c *Core) workingOn(gid string, env *Envelope) {
	st := c.reg.get(gid)
	if st == nil || env.Kind != KindSend {
		return
	}
	st.mu.Lock()
	st.setBrief(briefRef{from: env.From, msgID: env.MsgID, traceID: env.TraceID})
	st.mu.Unlock()
}
