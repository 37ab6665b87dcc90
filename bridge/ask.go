package bridge

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// AskRequest is bridge_ask.
type AskRequest struct {
	Question string
	Target   string
	Timeout  time.Duration // lifetime of the ask (expiresAt); default AskTTL
	TurnID   string        // resume waiting on this open ask
	Wait     time.Duration // how long this call waits; default and cap MaxWait
	// RequestID is optional: a repeat within RequestMemory asks nothing new.
	RequestID string
}

// Ask is bridge_ask for the entity gid: a new ASK, or with TurnID the wait
// on an open one resumed. With RequestID, a repeat answers from the first
// call (repeatAsk).
func (c *Core) Ask(ctx context.Context, gid string, req AskRequest, prog Progress) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if req.TurnID != "" { // resuming publishes nothing: turn_id is its own idempotency key
		if err := checkRequestID(req.RequestID); err != nil {
			return nil, err
		}
		return c.ask(ctx, st, req, prog)
	}
	return c.idempotent(ctx, st, req.RequestID, "bridge_ask", []string{req.Question, req.Target},
		func(ctx context.Context) (*Result, error) { return c.ask(ctx, st, req, prog) },
		func(ctx context.Context, call *reqCall) (*Result, error) {
			return c.repeatAsk(ctx, st, call, req, prog)
		})
}

func (c *Core) ask(ctx context.Context, st *entState, req AskRequest, prog Progress) (*Result, error) {
	var t *askTurn
	if req.TurnID != "" {
		st.mu.Lock()
		t = st.asks[req.TurnID]
		st.mu.Unlock()
		if t == nil {
			return nil, userErr("no open ask with turn_id %s: it was never made by you, or it ended more than a minute ago", Clip(req.TurnID))
		}
	} else {
		var err error
		if t, err = c.newAsk(ctx, st, req); err != nil {
			return nil, err
		}
	}
	return c.awaitAnswer(ctx, st, t, req.Wait, prog)
}

// askTarget is whom a new ask goes to: the target given, else the sender of
// the brief st works on.
func (c *Core) askTarget(st *entState, target string) (Entity, error) {
	if target != "" {
		return c.Resolve(target)
	}
	st.mu.Lock()
	from := st.brief.from
	st.mu.Unlock()
	if from == "" {
		return Entity{}, userErr("no target: you have no current brief to ask back about; pass target")
	}
	e, err := c.Resolve(from)
	if err != nil {
		return Entity{}, userErr("the sender of your current brief is gone: pass target")
	}
	return e, nil
}

// newAsk publishes an ASK and opens its turn.
func (c *Core) newAsk(ctx context.Context, st *entState, req AskRequest) (*askTurn, error) {
	if err := c.checkBody(req.Question); err != nil {
		return nil, err
	}
	target, err := c.askTarget(st, req.Target)
	if err != nil {
		return nil, err
	}
	if target.GID == st.GID {
		return nil, userErr("%s is you: ask another entity", target.Name)
	}
	ttl := req.Timeout
	if ttl <= 0 {
		ttl = c.cfg.AskTTL
	}
	env := c.newEnv(KindAsk, st.GID, target.GID, []byte(req.Question), ttl)
	env.TurnID = uuid.NewString()
	env.TraceID = uuid.NewString()
	st.mu.Lock()
	if st.brief.from == target.GID {
		env.TraceID = st.brief.traceID
	}
	st.mu.Unlock()
	resumed := resumedFor(ctx, KindAsk)
	if resumed != nil { // the ask again, in the same turn
		env.MsgID, env.TurnID, env.TraceID = resumed.MsgID, resumed.TurnID, resumed.TraceID
	}
	t, opened := resumedTurn(st, resumed), false
	if t == nil {
		t, opened = &askTurn{turnID: env.TurnID, msgID: env.MsgID, target: target.GID, traceID: env.TraceID, expiresAt: env.ExpiresAt, wake: make(chan struct{}, 1)}, true
		st.openAsk(t)
	}
	if err := c.publish(ctx, target.GID, env, true); err != nil {
		if opened {
			st.forgetAsk(t)
		}
		return nil, c.publishErr(err, target)
	}
	c.log.Info("asked", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, st.GID, LogTo, target.GID, "turnId", env.TurnID)
	return t, nil
}

// resumedTurn is the turn a resumed ask already has (its turn book kept it
// across the restart; an answer may be in it), nil if none.
func resumedTurn(st *entState, resumed *store.Request) *askTurn {
	if resumed == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.asks[resumed.TurnID]
}

// awaitAnswer waits on turn t until it ends (answered, no waiter, expired,
// abandoned, failed) or the wait runs out (pending: call again with its
// turn_id). A cancelled call abandons the turn.
func (c *Core) awaitAnswer(ctx context.Context, st *entState, t *askTurn, wait time.Duration, prog Progress) (*Result, error) {
	if wait <= 0 {
		wait = c.maxWait(ctx)
	}
	res := &Result{MsgID: t.msgID, TurnID: t.turnID, TraceID: t.traceID, Target: c.addrOf(t.target)}
	ended := func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return t.status != ""
	}
	_, err := c.await(ctx, waitSpec{st: st, d: c.capWait(ctx, wait), done: ended, wake: t.wake, prog: prog, what: "waiting for an answer from " + res.Target})
	if err != nil {
		if !c.isStopping() { // cut by a gateway stop, the ask is resumed after it
			c.abandonAsk(st, t, "the asking call was cancelled")
		}
		return nil, err
	}
	st.mu.Lock()
	status, reason, ans, notice := t.status, t.reason, t.answer, t.notice
	st.mu.Unlock()
	if status == "" {
		res.Status = StatusPending
		res.Next = "bridge_ask(turn_id=" + t.turnID + ") to keep waiting on the same ask"
		return res, nil
	}
	res.Status, res.Reason = status, reason
	if ans != nil {
		res.Messages = []Message{c.message(ans)}
	}
	if notice != nil {
		res.Messages = append(res.Messages, c.message(notice))
	}
	return res, nil
}

// abandonAsk ends an open turn st asked and tells the asked entity.
func (c *Core) abandonAsk(st *entState, t *askTurn, why string) {
	var out []outMsg
	st.mu.Lock()
	if t.status == "" {
		st.endAsk(t, StatusAbandoned, why)
		out = append(out, c.notice(KindAbandoned, st.GID, t.target, t.msgID, t.turnID, t.traceID, st.Name+" stopped waiting for the answer"))
	}
	st.mu.Unlock()
	c.publishAll(out)
}

// addrOf is gid as name@host (a local entity) or the remote entry's name.
func (c *Core) addrOf(gid string) string {
	if st := c.reg.get(gid); st != nil {
		return st.Addr()
	}
	return c.pres.name(gid)
}
