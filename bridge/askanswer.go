package bridge

import (
	"context"
	"errors"
)

// answer is bridge_send with a turn_id: an ANSWER to an open ask, taken at
// most once per turn (turnId is the idempotency key).
func (c *Core) answer(ctx context.Context, st *entState, req SendRequest) (*Result, error) {
	rt, res, err := c.openTurn(st, req)
	if err != nil || res.Status != "" {
		return res, err
	}
	if why := c.distrustedBy(c.mem.hostOf(rt.asker)); why != "" {
		res.Status, res.Reason = StatusFailed, why // the turn stays open: answer again once it trusts this host
		return res, nil
	}
	env := c.newEnv(KindAnswer, st.GID, rt.asker, []byte(req.Message), c.cfg.MessageTTL)
	env.Corr, env.TurnID, env.TraceID = rt.askMsgID, rt.turnID, rt.traceID
	if resumed := resumedFor(ctx, KindAnswer); resumed != nil {
		env.MsgID = resumed.MsgID
	}
	st.mu.Lock()
	if rt.answered { // a concurrent answer won
		st.mu.Unlock()
		res.Status = StatusAlreadyAnswered
		return res, nil
	}
	rt.answered = true
	st.noteRecv(rt)
	st.mu.Unlock()
	receipts, done := st.expectReceiptKept(env.MsgID)
	defer done()
	res.MsgID = env.MsgID
	if err := c.publish(ctx, rt.asker, env, true); err != nil {
		st.mu.Lock()
		rt.answered = false
		st.noteRecv(rt)
		st.mu.Unlock()
		if errors.Is(err, ErrUnroutable) {
			res.Status, res.Reason = StatusAbandoned, "the asker is gone"
			return res, nil
		}
		target, _ := c.Resolve(rt.asker)
		return nil, c.publishErr(err, target)
	}
	res.Status = StatusConfirmed
	c.awaitAnswerReceipt(ctx, st, rt, receipts, res)
	return res, nil
}

// openTurn finds the turn an answer is for and says whether it can still
// take one: res.Status is set when it cannot (abandoned, too late, already
// answered); an unknown turn or a target other than the asker is an error.
func (c *Core) openTurn(st *entState, req SendRequest) (*recvTurn, *Result, error) {
	st.mu.Lock()
	rt := st.turns[req.TurnID]
	if rt == nil {
		st.mu.Unlock()
		return nil, nil, userErr("no open ask with turn_id %s for you: it expired, was already answered and forgotten, or was never delivered to you", Clip(req.TurnID))
	}
	res := &Result{TurnID: rt.turnID, TraceID: rt.traceID}
	switch {
	case rt.missed:
		res.Status, res.Reason = StatusTooLate, missedReason(c.nameOf(rt.asker))
	case rt.abandoned:
		res.Status, res.Reason = StatusAbandoned, "the asker stopped waiting"
	case rt.late:
		res.Status, res.Reason = StatusTooLate, "the asker no longer waited"
	case rt.answered:
		res.Status = StatusAlreadyAnswered
	case !c.cfg.Now().Before(rt.expiresAt):
		res.Status, res.Reason = StatusTooLate, "the ask expired"
	}
	asker := rt.asker
	st.mu.Unlock()
	if res.Status != "" || req.Target == "" {
		return rt, res, nil
	}
	t, err := c.Resolve(req.Target)
	if err != nil {
		return nil, nil, err
	}
	if t.GID != asker {
		return nil, nil, userErr("turn %s was asked by %s, not %s", Clip(req.TurnID), c.nameOf(asker), Clip(req.Target))
	}
	return rt, res, nil
}

// awaitAnswerReceipt waits ReceiptWait for the asker's gateway to say how
// the answer landed, and records it in res and the turn.
func (c *Core) awaitAnswerReceipt(ctx context.Context, st *entState, rt *recvTurn, receipts <-chan *Envelope, res *Result) {
	got := false
	_, _ = c.await(ctx, waitSpec{st: st, d: c.cfg.ReceiptWait, receipts: receipts, onReceipt: func(r *Envelope) bool {
		got = true
		c.applyAnswerReceipt(st, rt, r, res)
		return true
	}})
	if !got && ctx.Err() == nil {
		res.Reason = "sent; no receipt from the asker's gateway yet"
	}
}

func (c *Core) applyAnswerReceipt(st *entState, rt *recvTurn, r *Envelope, res *Result) {
	switch r.Kind {
	case KindInjected:
		res.Status = StatusDelivered
	case KindTooLate:
		if string(r.Body) == StatusAlreadyAnswered {
			res.Status, res.Reason = StatusAlreadyAnswered, ""
			return
		}
		c.endedBy(res, StatusTooLate, r)
		st.mu.Lock()
		rt.late = true
		st.noteRecv(rt)
		st.mu.Unlock()
	case KindAbandoned:
		c.endedBy(res, StatusAbandoned, r)
		st.mu.Lock()
		rt.abandoned = true
		st.noteRecv(rt)
		st.mu.Unlock()
	case KindFailed:
		c.endedBy(res, StatusFailed, r)
	}
}
