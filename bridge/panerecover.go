package bridge

import (
	"context"
	"strconv"
	"time"
)

// Own-draft recovery: what a pane's runner does with a brief it typed and
// reported uncertain (its Enter swallowed, or the gateway died typing it).
// Such a brief stays at the head of its queue, typed, because its text may
// still sit in the composer, where anything typed next would merge with it.
// The head is never pasted again; instead:
//
//   - while the agent is idle and the composer holds exactly its text, the
//     runner presses Enter, at most ownDraftEnters times, at least
//     enterRetryEvery apart (counted in the queue record, so a restart does
//     not reset the bound); a turn starting settles it with a late INJECTED;
//   - when the composer no longer holds it, it leaves the queue as reported
//     (uncertain);
//   - when the Enters are used up, its sender is told FAILED (a late
//     receipt, corr = its msgId) and it leaves the queue. Its text is left
//     in the composer: herdr has no composer API, so clearing means sending
//     keys (ctrl+u, Escape, backspaces — agent-specific, API.md §7.2) that
//     land on whatever the composer holds when they arrive, including what
//     someone types there between our look and our keys; herdbridge never
//     risks a person's text, so it says so in the FAILED instead.
//
// A brief behind such a leftover is never typed over it (the two would be
// submitted as one turn, the FAILED one with it). While the composer holds
// text herdbridge typed (InjectReceipt.Waits == WaitsOwnDraft) the briefs
// behind wait at most ownDraftWait, then each is FAILED with the reason:
// the queue always moves. A draft someone else typed is waited on (its
// senders told why), as before: that pane has a person at it.

// ownDraftEnters bounds the Enter presses own-draft recovery spends on one
// brief, after the two of its typing.
const ownDraftEnters = 3

// enterRetryEvery spaces own-draft recovery's Enter presses: an agent that
// swallowed one may be redrawing, or slow after a long idle.
func (c *Core) enterRetryEvery() time.Duration { return 2 * c.cfg.PaneRecheck }

// ownDraftWait is how long a brief waits on a composer holding herdbridge's
// own unsubmitted text before it is FAILED: as long as a brief's own Enter
// retries take.
func (c *Core) ownDraftWait() time.Duration { return ownDraftEnters * c.enterRetryEvery() }

// paneRun is a runner's own state across its rounds (owned by its
// goroutine alone).
type paneRun struct {
	// ownDraftSince is when the head was first found waiting on a composer
	// holding herdbridge's own text (zero: it is not).
	ownDraftSince time.Time
}

// recoverHead is own-draft recovery for q, typed and reported uncertain:
// it reports whether q was settled.
func (c *Core) recoverHead(e Entity, q queued) bool {
	if q.Enters > 0 && c.cfg.Now().Before(q.EnterAt.Add(c.enterRetryEvery())) {
		return false // spaced: the runner looks again within PaneRecheck
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.InjectWait)
	defer cancel()
	r := c.cfg.Injector.Resubmit(ctx, Brief{To: e, Env: q.env, FromName: c.nameOf(q.env.From), Provenance: c.provenance(q.env)})
	switch r.Status {
	case StatusNotReady:
		return false
	case StatusSubmitted:
		c.log.Info("a brief reported uncertain was found in the composer and submitted", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, LogGID, e.GID, "enters", q.Enters+1)
		c.workingOn(e.GID, q.env)
		c.typedInto(q.Pane, q.env.MsgID)
		c.settleQueued(q, KindInjected, StatusSubmitted+": "+LateReceipt+"brief "+Excerpt(string(q.env.Body))+
			" was found unsent in the composer of "+e.Name+"'s pane (reported uncertain before); one Enter was pressed and the agent started the turn")
		return true
	case StatusUncertain: // found in the composer, Enter pressed, no turn seen
		q.Enters++
		q.EnterAt = c.cfg.Now()
		if q.Enters < ownDraftEnters {
			c.log.Info("a brief reported uncertain is still in its composer after an Enter: it is retried", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, LogGID, e.GID, "enters", q.Enters)
			if err := c.st.UpdateQueued(q.QueuedBrief); err != nil {
				c.log.Warn("cannot record an Enter retry", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, "err", err)
			}
			return false
		}
		c.giveUpOwnDraft(e, q)
		return true
	}
	c.log.Info("a brief reported uncertain is not in its composer: left as reported", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, LogGID, e.GID, LogReason, r.Reason)
	c.typedInto(q.Pane, q.env.MsgID) // the agent may have taken it: its file stays while it is the pane's last
	c.dequeue(q.QueuedBrief)
	return true
}

// giveUpOwnDraft settles q, whose Enters are used up with its text still
// in the composer: FAILED to its sender, and the queue goes on.
func (c *Core) giveUpOwnDraft(e Entity, q queued) {
	c.log.Warn("a brief stayed in its composer through every Enter retry: reported failed, its text left there", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, LogGID, e.GID, "enters", q.Enters)
	c.observeFor(HopInject, e.GID, q.env, StatusFailed, 0)
	c.settleQueued(q, KindFailed, LateReceipt+"brief "+Excerpt(string(q.env.Body))+" was typed into "+e.Name+"'s pane "+q.Pane+
		" (reported uncertain before) but never submitted: "+strconv.Itoa(2+q.Enters)+" Enter presses did not start a turn while the agent was idle. "+
		ownDraftLeftText+" Send it again if it still matters, once the composer is clear")
}

// ownDraftLeftText says why herdbridge leaves its own text in a composer.
const ownDraftLeftText = "Its text is left in the composer: herdr has no way to clear a composer without risking text someone types into it at the same moment, " +
	"so herdbridge does not try; whoever is at the pane can submit or clear it, and nothing is typed over it meanwhile."

// waitOwnDraft judges a head q that found the composer holding
// herdbridge's own unsubmitted text: false while it waits (at most
// ownDraftWait), true once it was FAILED.
func (c *Core) waitOwnDraft(run *paneRun, e Entity, q queued, r InjectReceipt) bool {
	now := c.cfg.Now()
	if run.ownDraftSince.IsZero() {
		run.ownDraftSince = now
	}
	if now.Sub(run.ownDraftSince) < c.ownDraftWait() {
		c.tellNotReady(q, r)
		return false
	}
	c.observeFor(HopInject, e.GID, q.env, StatusFailed, 0)
	c.settleQueued(q, KindFailed, "brief "+Excerpt(string(q.env.Body))+" not typed into "+e.Name+"'s pane "+q.Pane+": for "+
		c.ownDraftWait().String()+" its composer has held text herdbridge typed earlier that was never submitted (an earlier brief), "+
		"and a brief is never typed over a draft: the two would be submitted as one. Clear the composer of that pane, then send this brief again")
	return true
}
