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
	notice                         *Envelope // the NO_WAITER, FAILED or ABANDONED that ended it (in memory only)
	status                         string    // "" while open; answered|no_waiter|expired|abandoned|failed
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
	// holds a MISSED_ASK; answering it is too late (missedask.go)
	missed bool
}

// turnState is the part of an entity's record that holds its
// conversations: the asks it sent (by turnId and by the ASK's msgId), the
// asks it received and may answer, and the brief it works on. Its
// entState's mu guards it; every method runs with mu held. It owns the
// rule that every turn it holds is in its book (persisted) from when it
// opens until it is forgotten, and that asks and askByMsg list the same
// asks.
type turnState struct {
	owner    string               // the entity's gid, the key of its book's records
	book     *turnBook            // persists asks and turns; nil: kept in memory only
	asks     map[string]*askTurn  // turns this entity asked, by turnId
	askByMsg map[string]*askTurn  // the same, by the ASK's msgId
	turns    map[string]*recvTurn // asks this entity received and may answer, by turnId
	brief    briefRef             // the brief it is working on: default target of bridge_ask
}

// briefRef names a brief an entity works on: who sent it, its msgId and trace.
type briefRef struct {
	from, msgID, traceID string
}

func newTurnState(owner string, book *turnBook) turnState {
	return turnState{owner: owner, book: book, asks: map[string]*askTurn{}, askByMsg: map[string]*askTurn{}, turns: map[string]*recvTurn{}}
}

// openAsk records t as asked by st.
func (st *entState) openAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.addAsk(t)
}

// addAsk holds t, an ask just sent, and puts it in the book.
func (ts *turnState) addAsk(t *askTurn) {
	ts.loadAsk(t)
	ts.book.putAsk(ts.owner, t)
}

// loadAsk holds t, an ask already in the book.
func (ts *turnState) loadAsk(t *askTurn) {
	ts.asks[t.turnID] = t
	ts.askByMsg[t.msgID] = t
}

// loadRecv holds rt, a received ask already in the book.
func (ts *turnState) loadRecv(rt *recvTurn) { ts.turns[rt.turnID] = rt }

// setBrief records the brief the entity now works on.
func (ts *turnState) setBrief(b briefRef) { ts.brief = b }

// forgetAsk drops t (its ASK was never published).
func (st *entState) forgetAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dropAsk(t)
}

// dropAsk forgets t.
func (ts *turnState) dropAsk(t *askTurn) {
	delete(ts.asks, t.turnID)
	delete(ts.askByMsg, t.msgID)
	ts.book.drop(true, ts.owner, t.turnID)
}

// endAsk ends t, one of its asks, and records how.
func (ts *turnState) endAsk(t *askTurn, status, reason string) {
	if t.finish(status, reason) {
		ts.book.putAsk(ts.owner, t)
	}
}

// receive holds rt, an ask it received, and puts it in the book.
func (ts *turnState) receive(rt *recvTurn) {
	ts.turns[rt.turnID] = rt
	ts.book.putRecv(ts.owner, rt)
}

// noteRecv records a change of rt, an ask it received.
func (ts *turnState) noteRecv(rt *recvTurn) { ts.book.putRecv(ts.owner, rt) }

// dropRecv forgets the ask it received in turn id.
func (ts *turnState) dropRecv(id string) {
	delete(ts.turns, id)
	ts.book.drop(false, ts.owner, id)
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
// after they expired.
func (ts *turnState) expireTurns(now time.Time) {
	for _, t := range ts.asks {
		if t.status == "" && !now.Before(t.expiresAt) {
			ts.endAsk(t, StatusExpired, "no answer before expiresAt")
		}
		if t.status != "" && now.Sub(t.expiresAt) > turnLinger {
			ts.dropAsk(t)
		}
	}
	for id, rt := range ts.turns {
		if now.Sub(rt.expiresAt) > turnLinger {
			ts.dropRecv(id)
		}
	}
}

// forgetTurns drops every turn, the entity being removed.
func (ts *turnState) forgetTurns() {
	for _, t := range ts.asks {
		ts.dropAsk(t)
	}
	for id := range ts.turns {
		ts.dropRecv(id)
	}
}
