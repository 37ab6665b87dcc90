package bridge

import (
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// turnBook persists the turns of local entities, both sides (SPEC §10:
// open asks survive a gateway restart; never queued on the broker). A
// record is written under its entity's lock, so it changes on disk in the
// order the turn does; turns change a few times per ask, rarely next to
// messages, and the store calls back into nothing, so its lock is a leaf.
// A write that fails is logged: the turn still works until a restart.
type turnBook struct {
	st  *store.Store
	log *slog.Logger
}

func (b *turnBook) putAsk(owner string, t *askTurn) {
	if b != nil {
		b.put(askRecord(owner, t))
	}
}

func (b *turnBook) putRecv(owner string, rt *recvTurn) {
	if b != nil {
		b.put(recvRecord(owner, rt))
	}
}

func (b *turnBook) put(r store.Turn) {
	if err := b.st.PutTurn(r); err != nil {
		b.log.Warn("cannot persist a turn: it will not survive a restart", "turnId", r.TurnID, LogGID, r.Owner, "err", err)
	}
}

func (b *turnBook) drop(asked bool, owner, turnID string) {
	if b == nil {
		return
	}
	if err := b.st.DeleteTurn(asked, owner, turnID); err != nil {
		b.log.Warn("cannot forget a persisted turn", "turnId", turnID, LogGID, owner, "err", err)
	}
}

func askRecord(owner string, t *askTurn) store.Turn {
	r := store.Turn{Owner: owner, Asked: true, TurnID: t.turnID, MsgID: t.msgID, Peer: t.target, TraceID: t.traceID,
		ExpiresAt: t.expiresAt, Status: t.status, Reason: t.reason}
	if a := t.answer; a != nil {
		r.Answer = &store.TurnAnswer{MsgID: a.MsgID, From: a.From, TraceID: a.TraceID, TS: a.TS, Body: a.Body}
	}
	return r
}

func recvRecord(owner string, rt *recvTurn) store.Turn {
	return store.Turn{Owner: owner, TurnID: rt.turnID, MsgID: rt.askMsgID, Peer: rt.asker, TraceID: rt.traceID, ExpiresAt: rt.expiresAt,
		Answered: rt.answered, Abandoned: rt.abandoned, Late: rt.late, Missed: rt.missed}
}

// askTurnOf rebuilds a persisted ask; its answer, if it took one, as the
// ANSWER the asker's call returns (never published again: no host, no sig).
func askTurnOf(r store.Turn) *askTurn {
	t := &askTurn{turnID: r.TurnID, msgID: r.MsgID, target: r.Peer, traceID: r.TraceID, expiresAt: r.ExpiresAt,
		status: r.Status, reason: r.Reason, wake: make(chan struct{}, 1)}
	if a := r.Answer; a != nil {
		t.answer = &Envelope{V: Version, Kind: KindAnswer, MsgID: a.MsgID, TraceID: a.TraceID, From: a.From, To: r.Owner,
			Corr: r.MsgID, TurnID: r.TurnID, TS: a.TS, ExpiresAt: r.ExpiresAt, Body: a.Body}
	}
	return t
}

func recvTurnOf(r store.Turn) *recvTurn {
	return &recvTurn{turnID: r.TurnID, askMsgID: r.MsgID, asker: r.Peer, traceID: r.TraceID, expiresAt: r.ExpiresAt,
		answered: r.Answered, abandoned: r.Abandoned, late: r.Late, missed: r.Missed}
}

// loadTurns restores the persisted turns of the registered entities, before
// their inboxes attach (an ANSWER waiting there must find its turn). What
// expired over turnLinger ago, or belongs to no entity, is deleted.
//
// A restart closed every session, so an entity that had turns is detached
// as of now: one that re-attaches within ReattachGrace (the stdio relay
// reconnects at once) keeps them all; one that does not leaves its
// counterparts ABANDONED after the grace, as a closed session would,
// rather than waiting out expiresAt.
func (c *Core) loadTurns(now time.Time) error {
	recs, err := c.st.LoadTurns(func(r store.Turn) bool {
		return c.reg.get(r.Owner) != nil && now.Sub(r.ExpiresAt) <= turnLinger
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		st := c.reg.get(r.Owner)
		st.mu.Lock()
		if r.Asked {
			t := askTurnOf(r)
			st.loadAsk(t)
		} else {
			st.loadRecv(recvTurnOf(r))
		}
		st.detachedAtLoad(now)
		st.mu.Unlock()
	}
	return nil
}
