package bridge

import (
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Receipts of the forward path, on the sender's side: the ledger of briefs
// sent into panes whose receipt has not come back, the check that reports
// one overdue, and the report, after a restart, of every brief this
// gateway had begun typing (the worker's side of the same promise).

// ledger is the forward path's book of briefs sent into panes whose
// INJECTED/FAILED has not come back, mirrored in the store so that it
// outlives a crash: a brief lost between the worker gateway's ack and its
// inject is still reported FAILED. Its lock is a leaf.
type ledger struct {
	st  *store.Store
	log *slog.Logger

	mu     leafMutex
	awaits map[string]store.Await // by the brief's msgId
}

func newLedger(st *store.Store, log *slog.Logger) *ledger {
	return &ledger{st: st, log: log, awaits: map[string]store.Await{}}
}

// load reads the briefs still awaiting receipts at start.
func (l *ledger) load() error {
	awaits, err := l.st.LoadAwaits()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range awaits {
		l.awaits[a.MsgID] = a
	}
	return nil
}

// expect records a brief until its receipt comes back, persisted first: a
// crash anywhere after still ends in a receipt or a FAILED.
func (l *ledger) expect(a store.Await) {
	l.mu.Lock()
	l.awaits[a.MsgID] = a
	l.mu.Unlock()
	if err := l.st.PutAwait(a); err != nil {
		l.log.Warn("cannot persist a brief awaiting its receipt", LogMsgID, a.MsgID, LogTraceID, a.TraceID, "err", err)
	}
}

// queued moves the deadline of the brief corr, reported queued at its
// worker's pane, to its expiresAt plus grace: waiting there is no loss.
func (l *ledger) queued(corr string, grace time.Duration) {
	l.mu.Lock()
	a, ok := l.awaits[corr]
	if ok && !a.ExpiresAt.IsZero() && a.ExpiresAt.Add(grace).After(a.Deadline) {
		a.Deadline = a.ExpiresAt.Add(grace)
		l.awaits[corr] = a
	} else {
		ok = false
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	l.persist(a, "cannot persist the deadline of a queued brief")
}

// later moves the deadline of the brief corr, just asked to be given up,
// to until, and counts the ask.
func (l *ledger) later(corr string, until time.Time) {
	l.mu.Lock()
	a, ok := l.awaits[corr]
	if ok {
		a.Deadline, a.Asks = until, a.Asks+1
		l.awaits[corr] = a
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	l.persist(a, "cannot persist the deadline of an overdue brief")
}

// persist writes a's moved deadline. Its receipt may have taken it from
// memory, and deleted its record, between the caller's read and this
// write (the sweeper moves a given-up brief's deadline while its FAILED
// arrives): then the write brought a settled record back, which the next
// start would load and give up again, so it is deleted once more.
func (l *ledger) persist(a store.Await, what string) {
	if err := l.st.PutAwait(a); err != nil {
		l.log.Warn(what, LogMsgID, a.MsgID, LogTraceID, a.TraceID, "err", err)
		return
	}
	if !l.awaiting(a.MsgID) {
		l.forget(a.MsgID, a.TraceID, "cannot forget a settled brief")
	}
}

// awaits reports whether the brief corr still awaits its receipt.
func (l *ledger) awaiting(corr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.awaits[corr]
	return ok
}

// settle forgets the brief corr once its INJECTED, FAILED or ABANDONED
// arrived (or it was never published).
func (l *ledger) settle(corr string) {
	if a, ok := l.takeAwait(corr); ok {
		l.forget(corr, a.TraceID, "cannot forget a settled brief")
	}
}

// take removes corr from memory; it reports whether it was there.
func (l *ledger) take(corr string) bool {
	_, ok := l.takeAwait(corr)
	return ok
}

// takeAwait is take, with what was recorded.
func (l *ledger) takeAwait(corr string) (store.Await, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.awaits[corr]
	delete(l.awaits, corr)
	return a, ok
}

// forget deletes the brief msgID's record from the store (traceID: for
// the log line, if that fails).
func (l *ledger) forget(msgID, traceID, what string) {
	if err := l.st.DeleteAwait(msgID); err != nil {
		l.log.Warn(what, LogMsgID, msgID, LogTraceID, traceID, "err", err)
	}
}

// due lists the briefs past their deadline (still recorded).
func (l *ledger) due(now time.Time) []store.Await {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.Await
	for _, a := range l.awaits {
		if now.After(a.Deadline) {
			out = append(out, a)
		}
	}
	return out
}

// ids lists the msgIds of the briefs awaiting their receipt.
func (l *ledger) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.awaits))
	for id := range l.awaits {
		out = append(out, id)
	}
	return out
}

// inFlight counts the briefs awaiting their receipt, by target gid.
func (l *ledger) inFlight() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.awaits))
	for _, a := range l.awaits {
		out[a.To]++
	}
	return out
}

// BriefsInFlight counts the briefs this gateway sent into workers' panes
// whose receipt (INJECTED or FAILED) has not come back, by target gid: for
// metrics.
func (c *Core) BriefsInFlight() map[string]int { return c.ledger.inFlight() }

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

// overdueReceipts handles briefs whose receipt is past its deadline: the
// worker's gateway decides whether each is given up (giveup.go); only a
// brief no gateway would type any more is reported FAILED by this one
// alone. Called by the sweeper.
func (c *Core) overdueReceipts(now time.Time) {
	if now.Sub(c.startedAt) < c.cfg.ReceiptWait {
		// just (re)started: receipts that arrived while we were down are
		// still being delivered; judge nothing overdue before they are in
		return
	}
	for _, a := range c.ledger.due(now) {
		if c.receiptHeld(a) {
			c.ledger.settle(a.MsgID)
			continue
		}
		if !c.overdueBrief(a, now) {
			continue
		}
		held, took := c.takeOverdue(a)
		switch {
		case !took: // its receipt came meanwhile
		case held:
			c.ledger.forget(a.MsgID, a.TraceID, "cannot forget a settled brief")
		default:
			c.log.Warn("no INJECTED within the bound: brief reported failed", LogMsgID, a.MsgID, LogTraceID, a.TraceID, LogFrom, a.From, LogTo, a.To)
			c.mem.mark(overdueKey(a.MsgID), now.Add(c.cfg.MessageTTL)) // a receipt after this FAILED is held all the same
			c.reportUndelivered([]undelivered{{msgID: a.MsgID, traceID: a.TraceID, from: a.From, kind: KindSend, to: a.To,
				queue: c.inboxQueue(a.To), cause: "no receipt", notifier: a.To,
				reason: "brief " + a.Excerpt + " to " + a.ToName + ": no INJECTED receipt within the bound, so it was probably not typed (its gateway may have crashed between taking it and typing it); send it again if it still matters"}})
			c.ledger.forget(a.MsgID, a.TraceID, "cannot forget an overdue brief")
		}
	}
}

// receiptHeld reports whether brief a's receipt is already held for its
// sender (it came while the sweeper looked).
func (c *Core) receiptHeld(a store.Await) bool {
	st := c.reg.get(a.From)
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.heldReceipt(a.MsgID)
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
