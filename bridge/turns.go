package bridge

import "time"

// Turns: an ASK opens a turn that takes exactly one ANSWER, and only from
// the entity it asked (SPEC §4). The asker keeps an askTurn, the asked
// entity a recvTurn; both are guarded by their entity's lock.

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

// openAsk records t as asked by st.
func (st *entState) openAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.asks[t.turnID] = t
	st.askByMsg[t.msgID] = t
}

// forgetAsk drops t (its ASK was never published).
func (st *entState) forgetAsk(t *askTurn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.asks, t.turnID)
	delete(st.askByMsg, t.msgID)
}

// abandonTurns turns what is pending on st into ABANDONED for the
// counterparts: asks it received and did not answer, asks it sent (mu held).
func (c *Core) abandonTurns(st *entState) []outMsg {
	var out []outMsg
	for id, rt := range st.turns {
		if !rt.answered && !rt.abandoned {
			out = append(out, c.notice(KindAbandoned, st.GID, rt.asker, rt.askMsgID, rt.turnID, rt.traceID, st.Name+" went away before answering"))
		}
		delete(st.turns, id)
	}
	for _, t := range st.asks {
		if t.status == "" {
			out = append(out, c.notice(KindAbandoned, st.GID, t.target, t.msgID, t.turnID, t.traceID, st.Name+" stopped waiting for the answer"))
			t.finish(StatusAbandoned, "the asking session went away")
		}
	}
	return out
}

// expireTurns closes asks past expiresAt and forgets turns a minute after
// they ended (mu held).
func (st *entState) expireTurns(now time.Time) {
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
}
