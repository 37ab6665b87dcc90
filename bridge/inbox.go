package bridge

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// entState is the live state of one local entity. Guarded by Core.mu.
type entState struct {
	Entity
	tokens []string
	sub    Subscription

	held     []*heldMsg // arrival order
	waiters  []*waiter
	receipts map[string]chan *Envelope // outgoing msgId -> its INJECTED/FAILED/TOO_LATE/ABANDONED
	asks     map[string]*askTurn       // turns this entity asked, by turnId
	askByMsg map[string]*askTurn       // the same, by the ASK's msgId
	turns    map[string]*recvTurn      // asks this entity received and may answer, by turnId
	brief    briefRef                  // the brief it is working on: default target of bridge_ask

	sessions   int
	paneStatus string // live herdr agent status, for the roster
	detachedAt time.Time
	lastNudge  time.Time
}

type briefRef struct {
	from, msgID, traceID string
}

func newEntState(e Entity) *entState {
	return &entState{
		Entity:   e,
		receipts: map[string]chan *Envelope{},
		asks:     map[string]*askTurn{},
		askByMsg: map[string]*askTurn{},
		turns:    map[string]*recvTurn{},
	}
}

func (st *entState) snapshot() Entity {
	e := st.Entity
	e.Groups = append([]string(nil), st.Groups...)
	return e
}

func (st *entState) bound(key string) bool {
	if key == BroadcastAll {
		return true
	}
	for _, g := range st.Groups {
		if BroadcastKey(g) == key {
			return true
		}
	}
	return false
}

// heldMsg is a message held for an entity until it drains it. acker is nil
// for messages already settled with the transport (asks, receipts).
type heldMsg struct {
	env     *Envelope
	acker   Acker
	dups    []Acker // earlier deliveries of the same msgId, settled with it
	at      time.Time
	claimed bool
}

// waiter is an open blocking call of an entity that one arriving message
// resolves.
type waiter struct {
	accept func(*Envelope) bool
	ch     chan *heldMsg // capacity 1: exactly one message resolves a waiter
	gone   bool
	isSend bool
	onHeld func() // an open send is told when something else is held
}

// askTurn is an ASK this entity sent and is waiting on.
type askTurn struct {
	turnID, msgID, target, traceID string
	expiresAt                      time.Time
	answer                         *Envelope
	status                         string // "" while open; answered|no_waiter|expired|abandoned|failed
	reason                         string
	wake                           chan struct{}
}

func (t *askTurn) finish(status, reason string) {
	if t.status == "" {
		t.status, t.reason = status, reason
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// recvTurn is an ASK this entity received: it may answer it once.
type recvTurn struct {
	turnID, askMsgID, asker, traceID string
	expiresAt                        time.Time
	answered, abandoned, late        bool
}

// match hands env to the first waiter that accepts it. Called under lock.
func (st *entState) match(hm *heldMsg) bool {
	for i, w := range st.waiters {
		if w.gone || !w.accept(hm.env) {
			continue
		}
		st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
		w.gone = true
		hm.claimed = true
		w.ch <- hm
		return true
	}
	return false
}

func (st *entState) removeWaiter(w *waiter) {
	for i, x := range st.waiters {
		if x == w {
			st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
			break
		}
	}
	w.gone = true
}

func (st *entState) findHeld(msgID string) *heldMsg {
	for _, hm := range st.held {
		if hm.env.MsgID == msgID {
			return hm
		}
	}
	return nil
}

func (st *entState) dropHeld(set map[*heldMsg]bool) {
	out := st.held[:0]
	for _, hm := range st.held {
		if !set[hm] {
			out = append(out, hm)
		}
	}
	for i := len(out); i < len(st.held); i++ {
		st.held[i] = nil
	}
	st.held = out
}

func (c *Core) summaryLocked(st *entState) HeldSummary {
	counts := map[string]int{}
	var s HeldSummary
	for _, hm := range st.held {
		if hm.claimed {
			continue
		}
		s.Total++
		counts[hm.env.From]++
	}
	for from, n := range counts {
		s.From = append(s.From, FromCount{From: from, FromName: c.nameLocked(from), Count: n})
	}
	sort.Slice(s.From, func(i, j int) bool { return s.From[i].FromName < s.From[j].FromName })
	return s
}

func (c *Core) nameLocked(gid string) string {
	if st := c.ents[gid]; st != nil {
		return st.Name
	}
	if r := c.remote[gid]; r != nil {
		return r.p.Name + "@" + r.p.Host
	}
	return ""
}

// failedKinds are the kinds whose sender hears FAILED when they cannot be
// delivered.
var failedKinds = map[Kind]bool{KindSend: true, KindReply: true, KindAsk: true, KindAnswer: true}

// heldKinds are the kinds a pull entity keeps until it drains them.
var heldKinds = map[Kind]bool{KindSend: true, KindReply: true, KindBroadcast: true, KindFailed: true, KindTooLate: true, KindAbandoned: true}

// deliver is the transport's handler for gid's inbox: SPEC §3's checks in
// order (verify, then the inbox and the seen-set), then §4 on arrival.
func (c *Core) deliver(gid string, d Delivery) {
	where := InboxQueueName(gid)
	reason, detail, wait := c.verify(d, func(env *Envelope) string {
		if d.Key != "" && env.To != d.Key {
			return "to " + env.To + " but routing key " + d.Key
		}
		return ""
	})
	if wait {
		c.waitForPresence(d, where, gid+d.Env.MsgID, func(d Delivery) { c.deliver(gid, d) })
		return
	}
	if reason != "" {
		if reason == RefuseExpired && d.Env.Kind == KindSend {
			// authenticated (expiry is checked after signature and sender),
			// so the sender hears why its brief never arrived — once: a
			// replay of it must not make us write again
			key := gid + d.Env.MsgID
			c.mu.Lock()
			first := !c.seen.has(key)
			if first {
				c.markSeenUntilLocked(key, c.cfg.Now().Add(c.cfg.MessageTTL))
			}
			c.mu.Unlock()
			if first {
				c.send([]outMsg{c.control(KindFailed, gid, d.Env.From, d.Env.MsgID, "", d.Env.TraceID, "expired before delivery")})
			}
		}
		c.refuse(d, where, reason, detail)
		return
	}
	env := d.Env
	var out []outMsg
	settle := func(reject string) {
		var err error
		if reject != "" {
			err = d.Acker.Reject(reject)
		} else {
			err = d.Acker.Ack()
		}
		if err != nil {
			c.log.Warn("settle failed", LogMsgID, env.MsgID, LogGID, gid, "err", err)
		}
	}
	c.log.Debug("arrived", LogKind, env.Kind, LogMsgID, env.MsgID, LogGID, gid, LogFrom, env.From)
	c.mu.Lock()
	st := c.ents[gid]
	if st == nil {
		c.mu.Unlock()
		if failedKinds[env.Kind] {
			// the entity was removed with this in its inbox: tell the sender
			// (from the gateway itself: the entity no longer lives here)
			c.send([]outMsg{c.control(KindFailed, GatewayGID(c.cfg.Host), env.From, env.MsgID, "", env.TraceID, "recipient "+gid+" was removed from "+c.cfg.Host)})
		}
		c.refuse(d, where, RefuseNoEntity, "no local entity "+gid)
		return
	}
	if env.To != gid && !(IsBroadcastKey(env.To) && st.bound(env.To)) {
		c.mu.Unlock()
		c.refuse(d, where, RefuseToMismatch, "to "+env.To+" is not this inbox or one of its groups")
		return
	}
	if c.seen.has(gid + env.MsgID) {
		c.mu.Unlock()
		if d.Redelivered { // the broker handing back what we took before: benign
			settle("")
			return
		}
		c.refuse(d, where, RefuseReplayed, "msgId already taken")
		return
	}
	if hm := st.findHeld(env.MsgID); hm != nil { // redelivered or published twice while held: keep one copy
		if hm.acker == nil {
			c.mu.Unlock()
			settle("")
			return
		}
		if !d.Redelivered {
			c.mu.Unlock()
			c.refuse(d, where, RefuseReplayed, "msgId already held")
			return
		}
		// settle with the new tag, and the old one too: after a consumer
		// bounce it is stale (its ack fails harmlessly)
		hm.dups = append(hm.dups, hm.acker)
		hm.acker = d.Acker
		c.mu.Unlock()
		return
	}
	c.auditEnv("in", env, d.Key, "accepted")
	now := c.cfg.Now()
	if env.Expired(now) {
		c.markSeenLocked(gid+env.MsgID, env)
		if env.Kind == KindSend {
			out = append(out, c.control(KindFailed, gid, env.From, env.MsgID, "", env.TraceID, "expired before delivery"))
		}
		c.mu.Unlock()
		c.log.Info("expired on arrival", LogMsgID, env.MsgID, LogKind, env.Kind, LogGID, gid)
		settle("")
		c.send(out)
		return
	}
	if env.Kind == KindBroadcast && env.From == gid {
		c.markSeenLocked(gid+env.MsgID, env)
		c.mu.Unlock()
		settle("")
		return
	}
	hold := false
	switch env.Kind {
	case KindAsk:
		c.markSeenLocked(gid+env.MsgID, env)
		hm := &heldMsg{env: env, at: now}
		if st.match(hm) {
			st.turns[env.TurnID] = &recvTurn{turnID: env.TurnID, askMsgID: env.MsgID, asker: env.From, traceID: env.TraceID, expiresAt: env.ExpiresAt}
		} else {
			out = append(out, c.control(KindNoWaiter, gid, env.From, env.MsgID, env.TurnID, env.TraceID, "nobody is waiting: "+st.Name+" has no open bridge_send or bridge_poll"))
		}
	case KindAnswer:
		c.markSeenLocked(gid+env.MsgID, env)
		t := st.asks[env.TurnID]
		switch {
		case t != nil && t.status == StatusAbandoned:
			out = append(out, c.control(KindAbandoned, gid, env.From, env.MsgID, env.TurnID, env.TraceID, "the asker stopped waiting: "+t.reason))
		case t == nil || t.status != "" && t.status != StatusAnswered:
			out = append(out, c.control(KindTooLate, gid, env.From, env.MsgID, env.TurnID, env.TraceID, "the turn is no longer waiting"))
		case env.From != t.target:
			out = append(out, c.control(KindTooLate, gid, env.From, env.MsgID, env.TurnID, env.TraceID, "refused: this turn asked another entity"))
		case t.answer != nil:
			out = append(out, c.control(KindTooLate, gid, env.From, env.MsgID, env.TurnID, env.TraceID, StatusAlreadyAnswered))
		default:
			t.answer = env
			t.finish(StatusAnswered, "")
			out = append(out, c.control(KindInjected, gid, env.From, env.MsgID, env.TurnID, env.TraceID, "answer delivered to the waiting turn"))
		}
	case KindInjected, KindFailed, KindNoWaiter, KindTooLate, KindAbandoned:
		c.markSeenLocked(gid+env.MsgID, env)
		if _, ok := c.awaits[env.Corr]; ok && env.Kind != KindNoWaiter && env.Kind != KindTooLate {
			defer c.receiptCame(env.Corr) // after the lock is released
		}
		if ch, ok := st.receipts[env.Corr]; ok {
			select {
			case ch <- env:
			default:
			}
			break
		}
		if t := st.askByMsg[env.Corr]; t != nil && t.status == "" {
			switch env.Kind {
			case KindNoWaiter:
				t.finish(StatusNoWaiter, string(env.Body))
			case KindFailed:
				t.finish(StatusFailed, string(env.Body))
			case KindAbandoned:
				t.finish(StatusAbandoned, string(env.Body))
			}
			break
		}
		if env.Kind == KindAbandoned && env.TurnID != "" {
			if rt := st.turns[env.TurnID]; rt != nil {
				rt.abandoned = true
				break
			}
		}
		hold = heldKinds[env.Kind]
		if _, awaited := c.awaits[env.Corr]; env.Kind == KindInjected && (awaited || strings.HasPrefix(string(env.Body), StatusUncertain)) {
			hold = true // the sender's call is gone, but it must learn how its brief landed
		}
		if !hold {
			c.log.Debug("receipt with nothing waiting dropped", LogKind, env.Kind, LogMsgID, env.MsgID, "corr", env.Corr, LogGID, gid)
		}
	default: // SEND, REPLY, BROADCAST
		if env.Kind != KindReply && c.forwardsLocked(st) {
			if env.Kind == KindSend { // typed into the pane: the brief it works on
				st.brief = briefRef{from: env.From, msgID: env.MsgID, traceID: env.TraceID}
			}
			// forward path: ack first, then inject (SPEC §4) — and only if
			// the ack held: a brief still in the inbox could be typed twice
			c.markSeenLocked(gid+env.MsgID, env)
			e, inj := st.snapshot(), c.cfg.Injector
			c.mu.Unlock()
			if err := d.Acker.Ack(); err != nil {
				c.log.Warn("brief not acked, so not typed", LogMsgID, env.MsgID, LogGID, gid, "err", err)
				if env.Kind == KindSend {
					c.send([]outMsg{c.control(KindFailed, gid, env.From, env.MsgID, "", env.TraceID,
						"brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: its gateway could not take it from the inbox ("+err.Error()+")")})
				}
				return
			}
			c.wg.Add(1)
			go c.forward(e, env, inj)
			return
		}
		hold = true
	}
	if !hold {
		c.mu.Unlock()
		settle("")
		c.send(out)
		return
	}
	hm := &heldMsg{env: env, acker: d.Acker, at: now}
	st.held = append(st.held, hm)
	if !st.match(hm) {
		c.heldNoWaiterLocked(st)
	}
	c.mu.Unlock()
	c.send(out)
}

// heldNoWaiterLocked nudges: an open send is told at once; otherwise the
// entity's sessions are nudged by the nudge loop.
func (c *Core) heldNoWaiterLocked(st *entState) {
	for _, w := range st.waiters {
		if w.isSend && w.onHeld != nil {
			w.onHeld()
			return
		}
	}
	c.nudges[st.GID] = true
}

// claimHeld marks up to max unclaimed held messages accepted by f as
// claimed, in arrival order.
func claimHeld(st *entState, f func(*Envelope) bool, max int) []*heldMsg {
	var out []*heldMsg
	for _, hm := range st.held {
		if len(out) >= max {
			break
		}
		if hm.claimed || !f(hm.env) {
			continue
		}
		hm.claimed = true
		out = append(out, hm)
	}
	return out
}

// settleTaken acks messages the entity now has and forgets them.
func (c *Core) settleTaken(st *entState, hms []*heldMsg) error {
	// forget them first, under the lock that deliver holds: a copy of one
	// of them arriving from now on is acked by the seen-set, and none can
	// still swap in an acker that would then never be acked
	var ackers, dups []Acker
	c.mu.Lock()
	set := map[*heldMsg]bool{}
	for _, hm := range hms {
		set[hm] = true
		c.markSeenLocked(st.GID+hm.env.MsgID, hm.env)
		if hm.acker != nil {
			ackers = append(ackers, hm.acker)
		}
		dups = append(dups, hm.dups...)
	}
	st.dropHeld(set)
	c.mu.Unlock()
	// Acks run concurrently so a transport that group-commits settles a
	// whole drain in one write instead of one write per message.
	var firstErr error
	if len(ackers) == 1 {
		firstErr = ackers[0].Ack()
	} else {
		var errMu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range ackers {
			wg.Add(1)
			go func(a Acker) {
				defer wg.Done()
				if err := a.Ack(); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}(a)
		}
		wg.Wait()
	}
	for _, a := range dups {
		_ = a.Ack() // a stale tag of an earlier consumer fails: nothing to do
	}
	return firstErr
}

// unclaim returns messages to the held set when the call that took them
// went away before handing them over; a claimed ASK becomes ABANDONED.
func (c *Core) unclaim(st *entState, hms []*heldMsg) {
	var out []outMsg
	c.mu.Lock()
	for _, hm := range hms {
		if hm.env.Kind == KindAsk {
			if rt := st.turns[hm.env.TurnID]; rt != nil && !rt.answered {
				delete(st.turns, hm.env.TurnID)
				out = append(out, c.control(KindAbandoned, st.GID, hm.env.From, hm.env.MsgID, hm.env.TurnID, hm.env.TraceID, "the waiting call went away before the question was read"))
			}
			continue
		}
		hm.claimed = false
		if !st.match(hm) {
			c.heldNoWaiterLocked(st)
		}
	}
	c.mu.Unlock()
	c.send(out)
}

// abandonLocked turns what is pending on st into ABANDONED for the
// counterparts: asks it received and did not answer, asks it sent.
func (c *Core) abandonLocked(st *entState) []outMsg {
	var out []outMsg
	for id, rt := range st.turns {
		if !rt.answered && !rt.abandoned {
			out = append(out, c.control(KindAbandoned, st.GID, rt.asker, rt.askMsgID, rt.turnID, rt.traceID, st.Name+" went away before answering"))
		}
		delete(st.turns, id)
	}
	for _, t := range st.asks {
		if t.status == "" {
			out = append(out, c.control(KindAbandoned, st.GID, t.target, t.msgID, t.turnID, t.traceID, st.Name+" stopped waiting for the answer"))
			t.finish(StatusAbandoned, "the asking session went away")
		}
	}
	return out
}

// seenSet is a bounded set of (gid, msgId) pairs already handled, FIFO
// eviction. Keyed per entity: one broadcast is one msgId in many inboxes.
type seenSet struct {
	max  int
	m    map[string]struct{}
	ring []string
	next int
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, m: make(map[string]struct{}, max), ring: make([]string, max)}
}

func (s *seenSet) has(id string) bool { _, ok := s.m[id]; return ok }

func (s *seenSet) add(id string) {
	if _, ok := s.m[id]; ok {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = id
	s.m[id] = struct{}{}
	s.next = (s.next + 1) % s.max
}

func (s *seenSet) len() int { return len(s.m) }

// sweepLoop enforces expiresAt on held messages and turns (SPEC §4), and
// abandons the turns of entities detached past the grace.
func (c *Core) sweepLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.sweep()
		}
	}
}

func (c *Core) sweep() {
	now := c.cfg.Now()
	c.overdueReceipts(now)
	c.expirePending(now)
	c.saveMemory(now)
	type expired struct {
		st *entState
		hm *heldMsg
	}
	var exp []expired
	var out []outMsg
	c.mu.Lock()
	for _, st := range c.ents {
		for _, hm := range st.held {
			if !hm.claimed && hm.env.Expired(now) {
				hm.claimed = true
				exp = append(exp, expired{st, hm})
				if hm.env.Kind == KindSend {
					out = append(out, c.control(KindFailed, st.GID, hm.env.From, hm.env.MsgID, "", hm.env.TraceID, "expired unread in the inbox of "+st.Name))
				}
			}
		}
		for id, t := range st.asks {
			if t.status == "" && !now.Before(t.expiresAt) {
				t.finish(StatusExpired, "no answer before expiresAt")
			}
			if t.status != "" && now.Sub(t.expiresAt) > time.Minute {
				delete(st.asks, id)
				delete(st.askByMsg, t.msgID)
			}
		}
		for id, rt := range st.turns {
			if now.Sub(rt.expiresAt) > time.Minute {
				delete(st.turns, id)
			}
		}
		if st.sessions == 0 && !st.detachedAt.IsZero() && now.Sub(st.detachedAt) >= c.cfg.ReattachGrace {
			st.detachedAt = time.Time{}
			out = append(out, c.abandonLocked(st)...)
		}
	}
	c.mu.Unlock()
	for _, e := range exp {
		c.log.Info("held message expired", LogMsgID, e.hm.env.MsgID, LogKind, e.hm.env.Kind, LogGID, e.st.GID, LogTraceID, e.hm.env.TraceID)
		_ = c.settleTaken(e.st, []*heldMsg{e.hm})
	}
	c.send(out)
}

func (c *Core) nudgeLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.NudgeEvery / 4)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		now := c.cfg.Now()
		type job struct {
			e Entity
			s HeldSummary
		}
		var jobs []job
		c.mu.Lock()
		for gid := range c.nudges {
			st := c.ents[gid]
			if st == nil {
				delete(c.nudges, gid)
				continue
			}
			if now.Sub(st.lastNudge) < c.cfg.NudgeEvery {
				continue
			}
			delete(c.nudges, gid)
			s := c.summaryLocked(st)
			if s.Total == 0 {
				continue
			}
			st.lastNudge = now
			jobs = append(jobs, job{st.snapshot(), s})
		}
		nudger := c.cfg.Nudger
		c.mu.Unlock()
		if nudger == nil {
			continue
		}
		for _, j := range jobs {
			nudger.Nudge(j.e, j.s)
		}
	}
}

// onDeadLetter records a dead letter and reports it to its sender as FAILED
// (SPEC §4: nothing vanishes silently). Overflow is not reported again: the
// publisher was refused synchronously.
func (c *Core) onDeadLetter(dl DeadLetter) {
	rec := DeadLetterRecord{At: dl.At, MsgID: dl.MsgID, Reason: dl.Reason, Queue: dl.Queue}
	var out []outMsg
	if e := dl.Env; e != nil {
		rec.MsgID, rec.Kind, rec.From, rec.To = e.MsgID, e.Kind, e.From, e.To
		// Only the broker's own expiry is reported here: a message that sat
		// unconsumed past its TTL (its gateway was gone). A refused one was
		// answered, if at all, by the gateway that refused it — a forged
		// message must not make us write to whoever it names — and an
		// over-cap one was refused to its publisher synchronously.
		if failedKinds[e.Kind] && dl.Reason == ReasonExpired && c.reportableDeadLetter(e) {
			out = append(out, c.control(KindFailed, GatewayGID(c.cfg.Host), e.From, e.MsgID, "", e.TraceID, "dead-lettered ("+dl.Reason+") from "+dl.Queue))
			rec.Reported = true
		}
	}
	c.log.Warn("dead letter", LogMsgID, rec.MsgID, LogKind, rec.Kind, LogFrom, rec.From, LogTo, rec.To, LogReason, rec.Reason, "queue", rec.Queue)
	if err := c.st.appendDead(rec); err != nil {
		c.log.Error("dead-letter log write failed", LogMsgID, rec.MsgID, "err", err)
	}
	c.send(out)
	if err := dl.Acker.Ack(); err != nil {
		c.log.Warn("dead letter ack failed", LogMsgID, rec.MsgID, "err", err)
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
		return false // (the signature is checked outside the core's lock)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := "dlq:" + e.MsgID
	if c.seen.has(key) || c.cfg.Verifier != nil && c.ents[e.From] == nil {
		return false
	}
	c.markSeenUntilLocked(key, now.Add(c.cfg.MessageTTL))
	return true
}

// DeadLetters lists the dead letters this gateway consumed, newest last.
func (c *Core) DeadLetters(limit int) ([]DeadLetterRecord, error) { return c.st.DeadLetters(limit) }
