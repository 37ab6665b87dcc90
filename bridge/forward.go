package bridge

import (
	"context"
	"time"
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

// SetInjector enables the forward path for entities with a pane id.
func (c *Core) SetInjector(i Injector) {
	c.mu.Lock()
	c.cfg.Injector = i
	c.mu.Unlock()
}

// forwardsLocked reports whether st's briefs go through the forward path.
func (c *Core) forwardsLocked(st *entState) bool {
	return c.cfg.Injector != nil && st.PaneID != "" && st.Role == RoleWorker
}

// forward runs the forward path for one brief already acked: inject, then
// tell the sender INJECTED (its body the rung observed) or FAILED.
func (c *Core) forward(e Entity, env *Envelope, inj Injector) {
	defer c.wg.Done()
	// not tied to c.ctx: a graceful stop lets an inject in flight finish
	// (bounded) and send its receipt, instead of cutting it mid-typing
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.InjectWait)
	defer cancel()
	start := c.cfg.Now()
	c.mu.Lock()
	from := c.nameLocked(env.From)
	c.mu.Unlock()
	rec := awaitRecord{MsgID: env.MsgID, From: env.From, To: e.GID, ToName: e.Name, TraceID: env.TraceID, Excerpt: Excerpt(string(env.Body))}
	typing := false
	r := inj.Inject(ctx, Brief{To: e, Env: env, FromName: from, Typing: func() {
		if env.Kind != KindSend || typing {
			return
		}
		typing = true
		if err := c.st.putTyping(rec); err != nil {
			c.log.Warn("cannot record a brief being typed", LogMsgID, env.MsgID, "err", err)
		}
	}})
	c.log.Info("forward path", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "status", r.Status, LogReason, r.Reason, "ms", time.Since(start).Milliseconds())
	if env.Kind != KindSend {
		return // broadcasts are typed but not receipted
	}
	var out outMsg
	if r.Status == StatusFailed || r.Status == "" {
		out = c.control(KindFailed, e.GID, env.From, env.MsgID, "", env.TraceID, "brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: "+r.Reason)
	} else {
		out = c.control(KindInjected, e.GID, env.From, env.MsgID, "", env.TraceID, r.Status+receiptReason(r.Reason))
	}
	if len(c.send([]outMsg{out})) > 0 {
		return // the receipt did not go out: the typing record stays, and a restart reports it uncertain
	}
	if typing {
		if err := c.st.deleteTyping(env.MsgID); err != nil {
			c.log.Warn("cannot forget a typed brief", LogMsgID, env.MsgID, "err", err)
		}
	}
}

func receiptReason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// typedBeforeCrash reports, after a restart, every brief this gateway had
// begun typing when it stopped: INJECTED with rung uncertain, since whether
// the agent got it cannot be known now.
func (c *Core) typedBeforeCrash() error {
	recs, err := c.st.loadTyping()
	if err != nil {
		return err
	}
	for _, r := range recs {
		c.log.Warn("a brief was being typed when the gateway stopped: reported uncertain", LogMsgID, r.MsgID, LogTo, r.To)
		out := c.control(KindInjected, r.To, r.From, r.MsgID, "", r.TraceID,
			StatusUncertain+": the gateway of "+r.ToName+" stopped while typing brief "+r.Excerpt+"; it may or may not have reached the agent")
		c.send([]outMsg{out})
		if err := c.st.deleteTyping(r.MsgID); err != nil {
			return err
		}
	}
	return nil
}

// heldReceipt reports whether a receipt for msgID is held for st.
func heldReceipt(st *entState, msgID string) bool {
	for _, hm := range st.held {
		if hm.env.Corr == msgID && (hm.env.Kind == KindInjected || hm.env.Kind == KindFailed || hm.env.Kind == KindAbandoned) {
			return true
		}
	}
	return false
}

// awaitReceipt records a forward-path brief until its receipt comes back.
func (c *Core) awaitReceipt(a awaitRecord) {
	c.mu.Lock()
	c.awaits[a.MsgID] = a
	c.mu.Unlock()
	if err := c.st.putAwait(a); err != nil {
		c.log.Warn("cannot persist a brief awaiting its receipt", LogMsgID, a.MsgID, "err", err)
	}
}

// receiptCame forgets the brief corr once its INJECTED, FAILED or ABANDONED
// arrived (or it was never published).
func (c *Core) receiptCame(corr string) {
	c.mu.Lock()
	_, ok := c.awaits[corr]
	delete(c.awaits, corr)
	c.mu.Unlock()
	if ok {
		if err := c.st.deleteAwait(corr); err != nil {
			c.log.Warn("cannot forget a settled brief", LogMsgID, corr, "err", err)
		}
	}
}

// overdueReceipts turns briefs whose receipt is past its deadline into a
// FAILED held for the sender: the worker's gateway crashed between its ack
// and the inject, or never got the brief. Called by the sweeper.
func (c *Core) overdueReceipts(now time.Time) {
	var due, settled []awaitRecord
	c.mu.Lock()
	if now.Sub(c.startedAt) < c.cfg.ReceiptWait {
		// just (re)started: receipts that arrived while we were down are
		// still being delivered; judge nothing overdue before they are in
		c.mu.Unlock()
		return
	}
	for id, a := range c.awaits {
		if !now.After(a.Deadline) {
			continue
		}
		delete(c.awaits, id)
		if st := c.ents[a.From]; st != nil && heldReceipt(st, id) {
			settled = append(settled, a) // its receipt is already held for the sender
			continue
		}
		due = append(due, a)
	}
	c.mu.Unlock()
	for _, a := range settled {
		if err := c.st.deleteAwait(a.MsgID); err != nil {
			c.log.Warn("cannot forget a settled brief", LogMsgID, a.MsgID, "err", err)
		}
	}
	for _, a := range due {
		c.log.Warn("no INJECTED within the bound: brief reported failed", LogMsgID, a.MsgID, LogFrom, a.From, LogTo, a.To)
		out := c.control(KindFailed, a.To, a.From, a.MsgID, "", a.TraceID,
			"brief "+a.Excerpt+" to "+a.ToName+": no INJECTED receipt within the bound, so it was probably not typed (its gateway may have crashed between taking it and typing it); send it again if it still matters")
		c.send([]outMsg{out})
		if err := c.st.deleteAwait(a.MsgID); err != nil {
			c.log.Warn("cannot forget an overdue brief", LogMsgID, a.MsgID, "err", err)
		}
	}
}
