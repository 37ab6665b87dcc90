package bridge

import "time"

// Turns: an ASK opens a turn that takes exactly one ANSWER, and only from
// the entity it asked (SPEC §4). The asker keeps an askTurn, the asked
// entity a recvTurn; both are guarded by their entity's lock, and both are
// persisted through the entity's book (turnbook.go) from when they open
// until they are forgotten, so a gateway restart ends no conversation.

// turnLinger is how long a turn is remembered after it expired: a late
// resume or answer then hears how it ended rather than "no such turn".
const turnLinger = time.Minute

// askTurn is an ASK this entity sent and is waiting on.
type askTurn struct {
	turnID, msgID, target, traceID string
	expiresAt                      time.Time
	answer                         *Envelope
	status                         string // "" while open; answered|no_waiter|expired|abandoned|failed
	reason                         string
	wake                           chan struct{}
}

// finish ends t (once) and wakes its waiting call; it reports whether t
// was open.
func (t *askTurn) finish(status, reason string) bool {
	open := t.status == ""
	if open {
		t.status, t.reason = status, reason
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return open
}

// recvTurn is an ASK this entity received: it may answer it once.
type recvTurn struct {
	turnID, askMsgID, asker, traceID string
	expiresAt                        time.Time
	answered, abandoned, late        bool
	// missed: nobody was waiting, the asker heard NO_WAITER and the entity
	// holds a MISSED_ASK; answering it is too late (missed.go)
	missed bool
}

// openAsk records t as asked by st.
func (st *entState) openAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.asks[t.turnID] = t
	st.askByMsg[t.msgID] = t
	st.book.putAsk(st.GID, t)
}

// forgetAsk drops t (its ASK was never published).
func (st *entState) forgetAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropAsk(t)
}

// dropAsk forgets t (mu held).
func (st *entState) dropAsk(t *askTurn) {
	delete(st.asks, t.turnID)
	delete(st.askByMsg, t.msgID)
	st.book.drop(true, st.GID, t.turnID)
}

// endAsk ends t, an ask of st's, and records how (mu held).
func (st *entState) endAsk(t *askTurn, status, reason string) {
	if t.finish(status, reason) {
		st.book.putAsk(st.GID, t)
	}
}

// receive records rt, an ask st received (mu held).
func (st *entState) receive(rt *recvTurn) {
	st.turns[rt.turnID] = rt
	st.book.putRecv(st.GID, rt)
}

// noteRecv records a change of rt, an ask st received (mu held).
func (st *entState) noteRecv(rt *recvTurn) { st.book.putRecv(st.GID, rt) }

// dropRecv forgets the ask st received in turn id (mu held).
func (st *entState) dropRecv(id string) {
	delete(st.turns, id)
	st.book.drop(false, st.GID, id)
}

// abandonTurns turns what is pending on st into ABANDONED for the
// counterparts: asks it received and did not answer, asks it sent (mu
// held). A missed ask stays: its asker already heard NO_WAITER.
func (c *Core) abandonTurns(st *entState) []outMsg {
	var out []outMsg
	noAnswer, noWait := st.Name+" went away before answering", st.Name+" stopped waiting for the answer"
	if st.goneWhy != "" {
		noAnswer, noWait = st.goneWhy+" before answering", st.goneWhy+" while waiting for the answer"
	}
	for id, rt := range st.turns {
		if rt.missed {
			continue
		}
		if !rt.answered && !rt.abandoned {
			out = append(out, c.notice(KindAbandoned, st.GID, rt.asker, rt.askMsgID, rt.turnID, rt.traceID, noAnswer))
		}
		st.dropRecv(id)
	}
	for _, t := range st.asks {
		if t.status == "" {
			out = append(out, c.notice(KindAbandoned, st.GID, t.target, t.msgID, t.turnID, t.traceID, noWait))
			st.endAsk(t, StatusAbandoned, "the asking session went away")
		}
	}
	return out
}

// expireTurns closes asks past expiresAt and forgets turns turnLinger
// after they expired (mu held).
func (st *entState) expireTurns(now time.Time) {
	for _, t := range st.asks {
		if t.status == "" && !now.Before(t.expiresAt) {
			st.endAsk(t, StatusExpired, "no answer before expiresAt")
		}
		if t.status != "" && now.Sub(t.expiresAt) > turnLinger {
			st.dropAsk(t)
		}
	}
	for id, rt := range st.turns {
		if now.Sub(rt.expiresAt) > turnLinger {
			st.dropRecv(id)
		}
	}
}

// forgetTurns drops every turn of st, which is being removed (mu held).
func (st *entState) forgetTurns() {
	for _, t := range st.asks {
		st.dropAsk(t)
	}
	for id := range st.turns {
		st.dropRecv(id)
	}
}
