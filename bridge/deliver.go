package bridge

import "strings"

// Arrival: what happens when a message reaches a local entity's inbox.
// deliver runs SPEC §3's checks in order (verify, then the inbox and the
// seen-set: admit), then hands the message to one small handler per kind.
// arrive takes and releases the entity's lock: admit and the handlers
// only decide, into an arrival, and settleArrival carries that out with no
// lock held (SPEC §4).

// failedKinds are the kinds whose sender hears FAILED when they cannot be
// delivered.
var failedKinds = map[Kind]bool{KindSend: true, KindReply: true, KindAsk: true, KindAnswer: true}

// heldKinds are the kinds a pull entity keeps until it drains them.
var heldKinds = map[Kind]bool{KindSend: true, KindReply: true, KindBroadcast: true, KindFailed: true, KindTooLate: true, KindAbandoned: true, KindMissedAsk: true}

// arrival is what arrive decided for one message under the entity's lock;
// settleArrival carries it out once the lock is released.
type arrival struct {
	first   []outMsg      // published before the message is acked: it must outlive it (a MISSED_ASK)
	out     []outMsg      // notices to publish once the lock is released
	report  []undelivered // reported before the message is acked (fate.go)
	refuse  string        // dead-letter it with this reason (detail: refuseWhy)
	why     string        // the refusal's detail
	ack     bool          // settled here: ack it (after first and report)
	seen    bool          // taken into the seen-set once its ack held (a missed ASK: see onAsk)
	hold    bool          // keep it for the entity (reply path: acked once drained or spilled)
	keep    bool          // nothing more to do: its copy was swapped in (alreadyHere)
	gone    bool          // the entity was removed meanwhile (removal.go)
	forward *Entity       // type it into this entity's pane (forward path: acked first)
	after   func()        // runs last (a receipt settles its ledger entry)
}

// deliver is the transport's handler for gid's inbox.
func (c *Core) deliver(gid string, d Delivery) {
	if !c.verifyDelivery(gid, d) {
		return
	}
	if d.Env.Corr != "" && d.Env.To == gid {
		// a receipt or answer: its message's remembered status is current
		// before anyone can see the receipt (a retry right after it must
		// not report the status from before)
		c.reqs.observe(gid, d.Env)
	}
	c.log.Debug("arrived", LogKind, d.Env.Kind, LogMsgID, d.Env.MsgID, LogTraceID, d.Env.TraceID, LogGID, gid, LogFrom, d.Env.From)
	st := c.reg.get(gid)
	if st == nil {
		// removed, or being removed, with this in its inbox: its sender is
		// told (from the gateway itself: the entity no longer lives here)
		// before the message leaves the inbox
		c.arrivedForGone(gid, d)
		return
	}
	a := c.arrive(st, d)
	if a.gone {
		c.arrivedForGone(gid, d)
		return
	}
	c.settleArrival(st, d, a)
}

// arrive decides, under st's lock (taken and released here), what becomes
// of a verified delivery: admit's checks (the inbox, the seen-set, expiry),
// then one small handler per kind (SPEC §4).
func (c *Core) arrive(st *entState, d Delivery) arrival {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.removed {
		return arrival{gone: true}
	}
	if a, settled := c.admit(st, d); settled {
		return a
	}
	env := d.Env
	if a, refused := c.policyRefusal(st, env); refused {
		return a
	}
	c.recordIn(st, env)
	c.noteHeard(st, env)
	var a arrival
	switch env.Kind {
	case KindAsk:
		a = c.onAsk(st, d)
	case KindAnswer:
		a = c.onAnswer(st, env)
	case KindInjected, KindFailed, KindNoWaiter, KindTooLate, KindAbandoned:
		a = c.onNotice(st, d)
	case KindMissedAsk: // never typed into a pane: held for every role
		a = arrival{hold: true}
	default: // SEND, REPLY, BROADCAST
		a = c.onMessage(st, env)
	}
	if a.hold {
		c.hold(st, d)
	}
	return a
}

// hold adds d to st's held messages, or hands it to the waiter it
// resolves (st.mu held): either way it is acked once the entity has it.
func (c *Core) hold(st *entState, d Delivery) {
	hm := newHeld(d.Env, d.Acker)
	st.addHeld(hm)
	if !st.match(hm) {
		c.observeFor(HopHold, st.GID, d.Env, "held", 0)
		c.heldNoWaiter(st)
	}
	c.spillNext(st)
}

// verifyDelivery applies verify to a delivery into gid's inbox; false when
// it was refused or waits for its sender's presence.
func (c *Core) verifyDelivery(gid string, d Delivery) bool {
	where := c.inboxQueue(gid)
	reason, detail, wait := c.verify(d, func(env *Envelope) string {
		if d.Key != "" && env.To != d.Key {
			return "to " + env.To + " but routing key " + d.Key
		}
		return ""
	})
	if wait {
		c.waitForPresence(d, where, gid+d.Env.MsgID, func(d Delivery) { c.deliver(gid, d) })
		return false
	}
	if reason == "" {
		reason, detail = missedAskFromElsewhere(d.Env, c.cfg.Host)
	}
	if reason == "" && (isTraceKind(d.Env.Kind) || isPresenceSyncKind(d.Env.Kind) || d.Env.Kind == KindDeadLetter || d.Env.Kind == KindGiveUp) { // never an entity's message
		reason, detail = RefuseBadKind, "a "+string(d.Env.Kind)+" in an inbox (it belongs on the control queue)"
	}
	if reason == "" {
		return true
	}
	// authenticated (expiry is checked after signature and sender), so the
	// sender hears why its brief never arrived — once: a replay of it must
	// not make us write again
	if why := authenticatedRefusal(reason); why != "" && d.Env.Kind == KindSend && c.mem.mark(gid+d.Env.MsgID, c.cfg.Now().Add(c.cfg.MessageTTL)) {
		c.publishAll([]outMsg{c.receiptFor(KindFailed, gid, d.Env, why)})
	}
	c.refuse(d, where, reason, detail)
	return false
}

// admit checks a verified delivery against st (st.mu held): not its inbox,
// taken before, a copy of one held, expired, or the entity's own
// broadcast settle it here (settled true, with what to do); otherwise a
// handler decides.
func (c *Core) admit(st *entState, d Delivery) (arrival, bool) {
	env := d.Env
	if env.To != st.GID && !(IsBroadcastKey(env.To) && st.bound(env.To)) {
		return arrival{refuse: RefuseToMismatch, why: "to " + env.To + " is not this inbox or one of its groups"}, true
	}
	if a, ok := c.alreadyHere(st, d); ok {
		return a, true
	}
	c.observeEnv(HopAccept, env, d.Key, "accepted")
	if env.Expired(c.cfg.Now()) {
		return c.expiredOnArrival(st, d), true
	}
	if env.Kind == KindBroadcast && env.From == st.GID {
		c.mem.markEnv(st.GID+env.MsgID, env)
		return arrival{ack: true}, true
	}
	return arrival{}, false
}

// alreadyHere settles a copy of a message the entity took before or holds
// now (st.mu held). A broker redelivery is benign; another copy is a replay.
func (c *Core) alreadyHere(st *entState, d Delivery) (arrival, bool) {
	env := d.Env
	if c.mem.has(st.GID + env.MsgID) {
		if d.Redelivered { // the broker handing back what we took before
			return arrival{ack: true}, true
		}
		return arrival{refuse: RefuseReplayed, why: "msgId already taken"}, true
	}
	hm := st.findHeld(env.MsgID)
	switch {
	case hm == nil:
		return arrival{}, false
	case !d.Redelivered:
		return arrival{refuse: RefuseReplayed, why: "msgId already held"}, true
	case hm.acks == nil: // spilled: the store has it, this copy can go
		return arrival{ack: true}, true
	}
	// keep one copy, settled with the new tag, and the old one too: after
	// a consumer bounce it is stale (its ack fails harmlessly)
	hm.acks.dups = append(hm.acks.dups, hm.acks.acker)
	hm.acks.acker = d.Acker
	return arrival{keep: true}, true
}

// expiredOnArrival settles a message past expiresAt (st.mu held): it is
// reported (fate.go), then acked.
func (c *Core) expiredOnArrival(st *entState, d Delivery) arrival {
	env := d.Env
	c.mem.markEnv(st.GID+env.MsgID, env)
	c.log.Info("expired on arrival", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogKind, env.Kind, LogGID, st.GID)
	return arrival{ack: true, report: []undelivered{undeliveredEnv(env, st.GID, "inbox of "+st.Addr(), "expired", "expired before delivery")}}
}

// onAsk: an ASK resolves an open waiter, or is answered NO_WAITER at once
// and leaves a MISSED_ASK (missedask.go). One a waiter takes stays unacked in
// its transport until the call hands it over (settleTaken) or lets it go
// (settleAsks): a gateway killed before its client had the question hands
// it back after the restart, to be shown again (or answered NO_WAITER),
// instead of leaving its asker to wait out the ask.
func (c *Core) onAsk(st *entState, d Delivery) arrival {
	env := d.Env
	if t := st.turns[env.TurnID]; t != nil && t.answered { // a copy of one its client read and answered
		c.mem.markEnv(st.GID+env.MsgID, env)
		return arrival{ack: true}
	}
	rt := &recvTurn{turnID: env.TurnID, askMsgID: env.MsgID, asker: env.From, traceID: env.TraceID, expiresAt: env.ExpiresAt}
	if st.match(newHeld(env, d.Acker)) {
		st.receive(rt)
		return arrival{keep: true}
	}
	// not taken into the seen-set until it is acked (settleArrival): a
	// gateway killed before its NO_WAITER went out gets the ASK back from
	// the broker, and that copy must be answered again, not acked as one
	// seen before (its asker would wait out the whole ask)
	return c.missedAsk(st, env, rt)
}

// onAnswer: an ANSWER reaches its turn only if that turn still waits, and
// only from the entity it asked; anyone else hears TOO_LATE or ABANDONED.
func (c *Core) onAnswer(st *entState, env *Envelope) arrival {
	c.mem.markEnv(st.GID+env.MsgID, env)
	t := st.asks[env.TurnID]
	var kind Kind
	var reason string
	switch {
	case t != nil && t.status == StatusAbandoned:
		kind, reason = KindAbandoned, "the asker stopped waiting: "+t.reason
	case t == nil || t.status != "" && t.status != StatusAnswered:
		kind, reason = KindTooLate, "the turn is no longer waiting"
	case env.From != t.target:
		kind, reason = KindTooLate, "refused: this turn asked another entity"
	case t.answer != nil:
		kind, reason = KindTooLate, StatusAlreadyAnswered
	default:
		t.answer = env
		st.endAsk(t, StatusAnswered, "")
		kind, reason = KindInjected, "answer delivered to the waiting turn"
	}
	return arrival{out: []outMsg{c.noticeFor(kind, st.GID, env, reason)}}
}

// onNotice: a receipt or notice about one of the entity's own messages
// goes to the call waiting for it, else ends the turn it is about, else is
// held for the entity to read. Only a notice settled here is taken into
// the seen-set now; a held one is taken when it is drained (settleTaken),
// like any held message: until then it is still in the transport, and the
// copy a restart hands back must be held again, not acked as one the
// entity had (the sim lost the FAILEDs of a removed worker's senders so).
// A receipt left unacked in a call's kept box (a.keep) is taken when the
// call reads it (receiptRead).
func (c *Core) onNotice(st *entState, d Delivery) arrival {
	a := c.settleNotice(st, d)
	if !a.hold && !a.keep {
		c.mem.markEnv(st.GID+d.Env.MsgID, d.Env)
	}
	return a
}

// settleNotice decides onNotice's arrival (st.mu held). A redelivered
// INJECTED that got past the seen-set was held, not settled, when its
// gateway went down: its ledger entry was settled by its first arrival, so
// nothing awaits it now, but its sender has not read it — held again.
func (c *Core) settleNotice(st *entState, d Delivery) arrival {
	env, redelivered := d.Env, d.Redelivered
	var a arrival
	awaited := c.ledger.awaiting(env.Corr)
	rung, reason := "", ""
	if env.Kind == KindInjected {
		rung, reason = injectedRung(string(env.Body))
	}
	if env.Kind == KindFailed && !awaited && !redelivered && strings.HasPrefix(string(env.Body), GivenUpMark) {
		// a worker's gateway answering a GIVE_UP again: the first answer
		// (or the receipt before it) already settled the brief. Not a copy
		// the transport hands back: that is the first answer, held and not
		// drained when the gateway went down — its arrival settled the
		// ledger, so nothing awaits it now, and dropping it lost the only
		// FAILED (TestGivenUpFailedHeldSurvivesRestart). A repeat of one the
		// sender holds or drained has its msgId (givenUpFailedID): refused
		// by the held set or the seen-set before it gets here.
		c.log.Debug("repeated give-up FAILED dropped", LogMsgID, env.MsgID, "corr", env.Corr, LogGID, st.GID)
		return a
	}
	if rung == StatusQueued {
		// waiting at the worker's pane is no loss: its deadline is its expiry
		c.ledger.queued(env.Corr, c.cfg.ReceiptWait)
	} else if awaited && env.Kind != KindNoWaiter && env.Kind != KindTooLate && c.ledger.take(env.Corr) {
		// taken under the sender's lock, the lock the sweeper's overdue
		// check holds: a receipt that came is never also reported FAILED
		a.after = func() { c.ledger.forget(env.Corr, env.TraceID, "cannot forget a settled brief") }
	}
	if b, ok := st.receipts[env.Corr]; ok && b.offer(env, d.Acker) {
		a.keep = b.kept // acked once the call reads it, or held when it ends
		return a
	} else if ok {
		a.hold = true // a kept box is full: held, never dropped
		return a
	}
	if c.endsTurn(st, env) {
		return a
	}
	a.hold = heldKinds[env.Kind]
	if env.Kind == KindInjected && (awaited || redelivered || rung == StatusUncertain || rung == StatusQueued || strings.HasPrefix(reason, LateReceipt) || c.mem.has(overdueKey(env.Corr))) {
		a.hold = true // the sender's call is gone, but it must learn how its brief landed (or why it waits)
	}
	if !a.hold {
		c.log.Debug("receipt with nothing waiting dropped", LogKind, env.Kind, LogMsgID, env.MsgID, LogTraceID, env.TraceID, "corr", env.Corr, LogGID, st.GID)
	}
	return a
}

// endsTurn applies a notice to the turn it is about, if it is open: an ask
// of the entity's (NO_WAITER, FAILED, ABANDONED end it) or an ask it
// received (ABANDONED: the asker went away).
func (c *Core) endsTurn(st *entState, env *Envelope) bool {
	if t := st.askByMsg[env.Corr]; t != nil && t.status == "" {
		status := map[Kind]string{KindNoWaiter: StatusNoWaiter, KindFailed: StatusFailed, KindAbandoned: StatusAbandoned}[env.Kind]
		if status != "" && t.status == "" {
			t.notice = env // the asker's call shows it in messages, as data
			st.endAsk(t, status, noticeReason(env.Kind))
		}
		return true
	}
	if env.Kind == KindAbandoned && env.TurnID != "" {
		if rt := st.turns[env.TurnID]; rt != nil {
			rt.abandoned = true
			st.noteRecv(rt)
			return true
		}
	}
	return false
}

// onMessage: a SEND or BROADCAST into a worker's pane takes the forward
// path; everything else is held for the entity to drain.
func (c *Core) onMessage(st *entState, env *Envelope) arrival {
	if env.Kind == KindReply || !c.forwards(st) {
		return arrival{hold: true}
	}
	// forward path (the brief becomes the one the worker works on when it
	// is typed, not while it waits in the pane's queue: see workingOn): ack first, then inject (SPEC §4) — and only if the ack
	// held: a brief still in the inbox could be typed twice
	c.mem.markEnv(st.GID+env.MsgID, env)
	e := st.snapshot()
	return arrival{forward: &e}
}

// settleArrival carries out what arrive decided, with no lock held.
func (c *Core) settleArrival(st *entState, d Delivery, a arrival) {
	switch {
	case a.forward != nil:
		c.forwardAcked(*a.forward, d)
	case a.refuse != "":
		c.refuse(d, c.inboxQueue(st.GID), a.refuse, a.why)
		return
	case a.hold, a.keep: // acked when a call settles it, or spilled
	default:
		// durable in the transport before the message leaves it: a crash
		// between the two costs a copy (refused by msgId), never the notice
		c.publishAll(a.first)
		c.reportUndelivered(a.report)
		if c.ack(d) && a.seen {
			c.mem.markEnv(st.GID+d.Env.MsgID, d.Env)
		}
	}
	c.publishAll(a.out)
	if a.after != nil {
		a.after()
	}
}

// forwardAcked acks a brief for the forward path and queues it for its
// pane (panequeue.go); a brief whose ack failed is not typed (it could be
// typed twice) and its sender hears FAILED.
func (c *Core) forwardAcked(e Entity, d Delivery) {
	env := d.Env
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("brief not acked, so not typed", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "err", err)
		// reported as every undelivered message is (fate.go): with its
		// dead-letter line, once, and a broadcast copy logged only
		u := undeliveredEnv(env, e.GID, c.inboxQueue(e.GID), "not acked",
			"brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: its gateway could not take it from the inbox ("+err.Error()+")")
		u.notifier = e.GID
		c.reportUndelivered([]undelivered{u})
		return
	}
	c.enqueue(e, env)
}

// ack settles a delivery the entity needs no more.
func (c *Core) ack(d Delivery) bool {
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("settle failed", LogMsgID, d.Env.MsgID, LogTraceID, d.Env.TraceID, "err", err)
		return false
	}
	return true
}
