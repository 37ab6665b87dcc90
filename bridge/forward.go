package bridge

import (
	"context"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Injector types briefs into a worker's herdr pane: the forward path of
// SPEC §4. The herdr package implements it. Inject is called once per brief,
// after the brief was acked (at-most-once: a crash loses it visibly, never
// types it twice); it blocks until the brief was typed or failed, bounded by
// ctx, and reports the highest rung it observed. It may be called
// concurrently for different panes and must serialize writes to one pane.
type Injector interface {
	Inject(ctx context.Context, b Brief) InjectReceipt
}

// Brief is one message for the forward path.
type Brief struct {
	To       Entity    // the worker, with its pane id
	Env      *Envelope // SEND or BROADCAST
	FromName string    // the sender's name, for the prompt's header
	// Typing must be called right before the first byte is typed: the
	// core records it, so a crash from then on is reported "uncertain"
	// (maybe typed) rather than "failed".
	Typing func()
}

// InjectReceipt is what the forward path observed.
type InjectReceipt struct {
	Status string // StatusInjected | StatusSubmitted | StatusUncertain | StatusFailed
	Reason string
}

// forwards reports whether st's briefs go through the forward path. Called
// with st.mu held.
func (c *Core) forwards(st *entState) bool {
	return c.cfg.Injector != nil && st.PaneID != "" && st.Role == RoleWorker
}

// forward runs the forward path for one brief already acked: inject, then
// tell the sender INJECTED (its body the rung observed) or FAILED.
func (c *Core) forward(e Entity, env *Envelope) {
	defer c.wg.Done()
	// not tied to c.ctx: a graceful stop lets an inject in flight finish
	// (bounded) and send its receipt, instead of cutting it mid-typing
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.InjectWait)
	defer cancel()
	start := c.cfg.Now()
	rec := store.Await{MsgID: env.MsgID, From: env.From, To: e.GID, ToName: e.Name, TraceID: env.TraceID, Excerpt: Excerpt(string(env.Body))}
	typing := false
	r := c.cfg.Injector.Inject(ctx, Brief{To: e, Env: env, FromName: c.nameOf(env.From), Typing: func() {
		if env.Kind != KindSend || typing {
			return
		}
		typing = true
		if err := c.st.PutTyping(rec); err != nil {
			c.log.Warn("cannot record a brief being typed", LogMsgID, env.MsgID, "err", err)
		}
	}})
	c.log.Info("forward path", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "status", r.Status, LogReason, r.Reason, "ms", time.Since(start).Milliseconds())
	if env.Kind != KindSend {
		return // broadcasts are typed but not receipted
	}
	if c.publishAll([]outMsg{c.injectReceipt(e, env, r)}) > 0 {
		return // the receipt did not go out: the typing record stays, and a restart reports it uncertain
	}
	if typing {
		if err := c.st.DeleteTyping(env.MsgID); err != nil {
			c.log.Warn("cannot forget a typed brief", LogMsgID, env.MsgID, "err", err)
		}
	}
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

// typedBeforeCrash reports, after a restart, every brief this gateway had
// begun typing when it stopped: INJECTED with rung uncertain, since whether
// the agent got it cannot be known now.
func (c *Core) typedBeforeCrash() error {
	recs, err := c.st.LoadTyping()
	if err != nil {
		return err
	}
	for _, r := range recs {
		c.log.Warn("a brief was being typed when the gateway stopped: reported uncertain", LogMsgID, r.MsgID, LogTo, r.To)
		out := c.notice(KindInjected, r.To, r.From, r.MsgID, "", r.TraceID,
			StatusUncertain+": the gateway of "+r.ToName+" stopped while typing brief "+r.Excerpt+"; it may or may not have reached the agent")
		c.publishAll([]outMsg{out})
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
			c.ledger.forget(a.MsgID, "cannot forget a settled brief")
		default:
			c.log.Warn("no INJECTED within the bound: brief reported failed", LogMsgID, a.MsgID, LogFrom, a.From, LogTo, a.To)
			c.publishAll([]outMsg{c.notice(KindFailed, a.To, a.From, a.MsgID, "", a.TraceID,
				"brief "+a.Excerpt+" to "+a.ToName+": no INJECTED receipt within the bound, so it was probably not typed (its gateway may have crashed between taking it and typing it); send it again if it still matters")})
			c.ledger.forget(a.MsgID, "cannot forget an overdue brief")
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
