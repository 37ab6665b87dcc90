package bridge

import (
	"context"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Injector types briefs into a worker's herdr pane: the forward path of
// SPEC §4. The herdr package implements it; the core decides what waits
// and in which order (the pane queues, panequeue.go), the Injector only
// how a pane is judged ready and how a brief is typed. The core calls it
// from the one goroutine that owns a pane's queue, so calls for one pane
// never overlap; calls for different panes run concurrently.
type Injector interface {
	// Inject types b once the pane is ready, after calling b.Typing, and
	// reports the highest rung it observed. A pane that is not ready (the
	// agent busy, a dialog open, a draft someone typed in the composer) is
	// reported StatusNotReady with nothing typed: the brief stays queued.
	// Bounded by ctx.
	Inject(ctx context.Context, b Brief) InjectReceipt
	// Resubmit is for b, typed earlier and reported uncertain: if the pane
	// is ready and its composer holds exactly b's text, it presses Enter
	// once (never pastes again) and reports StatusSubmitted when the turn
	// started. StatusNotReady: look again later; anything else: b is not
	// (or no longer) in the composer, or the Enter did not start a turn.
	Resubmit(ctx context.Context, b Brief) InjectReceipt
}

// Brief is one message for the forward path.
type Brief struct {
	To       Entity    // the worker, with its pane id
	Env      *Envelope // SEND or BROADCAST
	FromName string    // the sender's name, for the prompt's header
	// Typing must be called right before the first byte is typed: the
	// core records durably that typing began, so a crash from then on
	// reports the brief "uncertain" and never types it again. If it
	// returns an error, nothing may be typed.
	Typing func() error
}

// StatusNotReady is an Injector's "nothing typed: the pane is not ready";
// it is never a tool status (the sender hears StatusQueued).
const StatusNotReady = "not_ready"

// InjectReceipt is what the forward path observed.
type InjectReceipt struct {
	Status string // StatusSubmitted | StatusInjected | StatusUncertain | StatusFailed | StatusNotReady
	// Reason is a sentence for the sender; for StatusNotReady it names
	// the worker's state ("w is working", "w waits on a dialog", …).
	Reason string
	// Waits is, for StatusNotReady, what the pane waits on: the agent's
	// status ("working", "blocked", …) or WaitsDraft.
	Waits string
}

// WaitsDraft is InjectReceipt.Waits for a composer holding a draft that
// is not ours: never typed over.
const WaitsDraft = "draft"

// WaitsOwnDraft is InjectReceipt.Waits for a composer holding text
// herdbridge typed earlier and never saw submitted: never typed over
// either, and waited on for a bound only (panerecover.go).
const WaitsOwnDraft = "own_draft"

// forwards reports whether st's briefs go through the forward path. Called
// with st.mu held.
func (c *Core) forwards(st *entState) bool {
	return c.cfg.Injector != nil && st.PaneID != "" && st.Role == RoleWorker
}

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
	e, live := c.workerOf(q)
	switch {
	case !live && q.Typed: // typed and reported (uncertain) before the pane went: nothing new to say
		c.discardBrief(q.env.MsgID)
		c.dequeue(q.QueuedBrief)
		return true
	case !live:
		c.settleQueued(q, KindFailed, "brief "+Excerpt(string(q.env.Body))+" not typed: "+c.nameOf(q.To)+
			" left pane "+q.Pane+" (closed or removed) while the brief was queued")
		return true
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
	r := c.cfg.Injector.Inject(ctx, Brief{To: e, Env: env, FromName: c.nameOf(env.From), Typing: func() error {
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
		c.dequeue(q.QueuedBrief)
	default:
		c.discardBrief(env.MsgID)
		c.dequeue(q.QueuedBrief)
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

// workingOn records env, a SEND just typed into gid's pane, as the brief
// the worker works on: the default target of its bridge_ask, and whose
// sender hears ABANDONED if the worker goes away before replying.
func (c *Core) workingOn(gid string, env *Envelope) {
	st := c.reg.get(gid)
	if st == nil || env.Kind != KindSend {
		return
	}
	st.mu.Lock()
	st.brief = briefRef{from: env.From, msgID: env.MsgID, traceID: env.TraceID}
	st.mu.Unlock()
}

// LateReceipt opens the reason of an INJECTED that comes after the brief
// was already reported (uncertain, then found in the composer and
// submitted): held for the sender like any receipt it awaits.
const LateReceipt = "late receipt: "

// WaitsDialog is InjectReceipt.Waits for an agent whose dialog waits for
// an answer (herdr's status blocked).
const WaitsDialog = "blocked"

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

// typedBeforeCrash reports, after a restart, every brief this gateway had
// begun typing when it stopped: INJECTED with rung uncertain, since whether
// the agent got it cannot be known now.
func (c *Core) typedBeforeCrash() error {
	recs, err := c.st.LoadTyping()
	if err != nil {
		return err
	}
	for _, r := range recs {
		c.log.Warn("a brief was being typed when the gateway stopped: reported uncertain", LogMsgID, r.MsgID, LogTraceID, r.TraceID, LogTo, r.To)
		out := c.notice(KindInjected, r.To, r.From, r.MsgID, "", r.TraceID,
			StatusUncertain+": the gateway of "+r.ToName+" stopped while typing brief "+r.Excerpt+"; it may or may not have reached the agent")
		if c.publishAll([]outMsg{out}) == 0 {
			// the receipt is out: a sender on this host must not also hear
			// FAILED from the sweeper's overdue check, which would run before
			// the receipt's delivery if the restart took longer than the
			// check's grace (a loaded machine did)
			c.ledger.settle(r.MsgID)
		}
		if err := c.st.DeleteTyping(r.MsgID); err != nil {
			return err
		}
	}
	return nil
}

// overdueReceipts turns briefs whose receipt is past its deadline into a
// FAILED held for the sender: the worker's gateway crashed between its ack
// and the inject, or never got the brief. Called by the sweeper.
func (c *Core) overdueReceipts(now time.Time) {
	if now.Sub(c.startedAt) < c.cfg.ReceiptWait {
		// just (re)started: receipts that arrived while we were down are
		// still being delivered; judge nothing overdue before they are in
		return
	}
	for _, a := range c.ledger.due(now) {
		held, took := c.takeOverdue(a)
		switch {
		case !took: // its receipt came meanwhile
		case held:
			c.ledger.forget(a.MsgID, a.TraceID, "cannot forget a settled brief")
		default:
			c.log.Warn("no INJECTED within the bound: brief reported failed", LogMsgID, a.MsgID, LogTraceID, a.TraceID, LogFrom, a.From, LogTo, a.To)
			c.publishAll([]outMsg{c.notice(KindFailed, a.To, a.From, a.MsgID, "", a.TraceID,
				"brief "+a.Excerpt+" to "+a.ToName+": no INJECTED receipt within the bound, so it was probably not typed (its gateway may have crashed between taking it and typing it); send it again if it still matters")})
			c.ledger.forget(a.MsgID, a.TraceID, "cannot forget an overdue brief")
		}
	}
}

// takeOverdue removes an overdue brief from the ledger under its sender's
// lock (the lock a delivery holds while it holds the receipt), and reports
// whether its receipt is already held for the sender.
func (c *Core) takeOverdue(a store.Await) (held, took bool) {
	st := c.reg.get(a.From)
	if st == nil {
		return false, c.ledger.take(a.MsgID)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.heldReceipt(a.MsgID), c.ledger.take(a.MsgID)
}
