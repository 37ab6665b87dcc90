package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// SendRequest is bridge_send.
type SendRequest struct {
	Target    string
	Message   string
	Wait      time.Duration
	TurnID    string
	RequestID string // optional: a repeat within RequestMemory publishes nothing
	// Priority is "" or PriorityNext: the brief jumps the worker's pane
	// queue (priority.go).
	Priority string
}

// openSend is a bridge_send between its publish and its result.
type openSend struct {
	st        *entState
	target    Entity
	env       *Envelope
	forwarded bool    // into a pane: a receipt (INJECTED/FAILED) follows
	w         *waiter // resolved by the target's reply or an ASK; nil: no wait
	nudged    chan struct{}
	receipts  <-chan *Envelope
	done      func()
	wait      time.Duration
	limit     time.Duration // the longest this caller may wait (its next step says so)
}

// Send is bridge_send for the entity gid (SPEC §2): a SEND into a worker
// (the forward path), a REPLY into a primary, or with TurnID an ANSWER.
// With RequestID, a repeat answers from the first call (repeatSend).
func (c *Core) Send(ctx context.Context, gid string, req SendRequest, prog Progress) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(req.Message); err != nil {
		return nil, err
	}
	args := []string{req.Target, req.Message, req.TurnID}
	if req.Priority != "" { // appended only when set: digests of calls without it are unchanged
		args = append(args, req.Priority)
	}
	return c.idempotent(ctx, st, req.RequestID, "bridge_send", args,
		func(ctx context.Context) (*Result, error) { return c.send(ctx, st, req, prog) },
		func(ctx context.Context, call *reqCall) (*Result, error) {
			return c.repeatSend(ctx, st, call, req, prog)
		})
}

func (c *Core) send(ctx context.Context, st *entState, req SendRequest, prog Progress) (*Result, error) {
	if req.TurnID != "" {
		return c.answer(ctx, st, req)
	}
	target, err := c.Resolve(req.Target)
	if err != nil {
		return nil, err
	}
	if target.GID == st.GID {
		return nil, userErr("%s is you: send to another entity", Clip(req.Target))
	}
	if target.Role == RoleWorker {
		if err := c.briefRefused(st.view(), "brief other workers"); err != nil {
			return nil, err
		}
	}
	if err := checkPriority(req.Priority, target, req.TurnID); err != nil {
		return nil, err
	}
	if res := c.distrustedResult(target); res != nil {
		return res, nil // its host would refuse it unseen: say so now
	}
	s := c.openSend(ctx, st, target, req)
	defer c.closeSend(s)
	res := &Result{Status: StatusConfirmed, MsgID: s.env.MsgID, TraceID: s.env.TraceID, Target: target.Addr()}
	spooled, err := c.publishSend(ctx, s, req.Message)
	if err != nil {
		return nil, err
	}
	if spooled {
		return c.sendSpooled(s, res), nil
	}
	if s.w == nil && !s.forwarded {
		res.Held = c.heldFor(st)
		return res, nil
	}
	return c.awaitSend(ctx, s, res, prog)
}

// openSend builds the message and opens what the call waits on: the
// receipts of its message and, with a wait, a waiter for the reply.
func (c *Core) openSend(ctx context.Context, st *entState, target Entity, req SendRequest) *openSend {
	kind := KindReply
	if target.Role == RoleWorker {
		kind = KindSend
	}
	s := &openSend{st: st, target: target, wait: c.capWait(ctx, req.Wait), limit: c.maxWait(ctx), nudged: make(chan struct{}, 1)}
	s.env = c.newEnv(kind, st.GID, target.GID, []byte(req.Message), c.cfg.MessageTTL)
	resumed := resumedFor(ctx, kind) // a retry of a send whose publish is not known to have completed
	if resumed != nil {
		s.env.MsgID = resumed.MsgID
	}
	if kind == KindSend {
		s.env.Priority = req.Priority
	}
	s.forwarded = kind == KindSend && c.forwardsTo(target)
	s.receipts, s.done = st.expectReceiptKept(s.env.MsgID)
	st.mu.Lock()
	defer st.mu.Unlock()
	s.env.TraceID = uuid.NewString()
	if kind == KindReply && st.brief.from == target.GID {
		// a reply to the brief answers it: its trace, and corr the brief
		// (so `herdbridge trace <brief msgId>` finds the reply too)
		s.env.TraceID, s.env.Corr = st.brief.traceID, st.brief.msgID
	}
	if resumed != nil {
		s.env.TraceID = resumed.TraceID
	}
	if kind == KindSend && s.wait > 0 {
		s.w = s.replyWaiter()
		st.addWaiter(s.w)
	}
	return s
}

// replyWaiter is the waiter of an open send into a worker: resolved by the
// worker's reply or an ASK from any of the caller's workers.
func (s *openSend) replyWaiter() *waiter {
	return &waiter{
		ch:     make(chan *heldMsg, 1),
		isSend: true,
		accept: func(e *Envelope) bool {
			return e.Kind == KindAsk || (e.Kind == KindReply || e.Kind == KindSend) && e.From == s.target.GID
		},
		onHeld: func() {
			select {
			case s.nudged <- struct{}{}:
			default:
			}
		},
	}
}

// forwardsTo reports whether a SEND to target is typed into a pane, so a
// receipt will follow.
func (c *Core) forwardsTo(target Entity) bool {
	if target.Host == c.cfg.Host {
		return target.PaneID != "" && c.cfg.Injector != nil
	}
	r := c.pres.entry(target.GID)
	return r != nil && r.p.Forward
}

// closeSend ends the call: its receipts are no longer awaited, and a
// message that resolved its waiter after it decided to return goes back.
func (c *Core) closeSend(s *openSend) {
	s.done()
	if hm, _ := c.endWait(s.st, s.w, nil); hm != nil {
		c.unclaim(s.st, []*heldMsg{hm})
	}
}

// publishSend publishes the message; a forwarded brief is in the ledger
// first, so a crash anywhere after still ends in a receipt or a FAILED.
// spooled: the broker is unreachable and the message waits at this
// gateway; a forwarded brief's receipt then waits as long as it may.
func (c *Core) publishSend(ctx context.Context, s *openSend, body string) (spooled bool, err error) {
	env := s.env
	if s.forwarded {
		c.ledger.expect(store.Await{MsgID: env.MsgID, From: s.st.GID, To: s.target.GID, ToName: s.target.Name, TraceID: env.TraceID, Excerpt: Excerpt(body),
			Deadline: c.cfg.Now().Add(c.cfg.InjectWait + c.cfg.ReceiptWait), ExpiresAt: env.ExpiresAt, ToHost: s.target.Host})
	}
	if spooled, err = c.publishSpool(ctx, s.target.GID, env, true); err != nil {
		if s.forwarded {
			c.ledger.settle(env.MsgID)
		}
		return false, c.publishErr(err, s.target)
	}
	if spooled && s.forwarded {
		c.ledger.queued(env.MsgID, c.cfg.ReceiptWait)
	}
	c.log.Info("sent", LogKind, env.Kind, LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, s.st.GID, LogTo, s.target.GID)
	return spooled, nil
}

// brokerDownReason is the reason of a result whose message was spooled.
const brokerDownReason = "the broker is unreachable: the message is kept at this gateway and published when the broker returns"

// sendSpooled is the result of a send whose message was spooled: queued,
// at once — waiting for a reply over a broker that is down would only
// wait out the cap.
func (c *Core) sendSpooled(s *openSend, res *Result) *Result {
	res.Status, res.Reason = StatusQueued, brokerDownReason
	res.Next = "bridge_poll(target=" + s.target.Name + ") later: the reply"
	if s.forwarded {
		res.Next += " and the brief's receipt (INJECTED or FAILED, corr " + res.MsgID + ")"
	}
	res.Next += " will be held for you"
	res.Held = c.heldFor(s.st)
	return res
}

// awaitSend waits for the brief's receipt and, with a wait, the reply.
func (c *Core) awaitSend(ctx context.Context, s *openSend, res *Result, prog Progress) (*Result, error) {
	// a forwarded brief's receipt comes within the worker's inject bound
	// plus its travel time (else the sweeper reports it FAILED)
	wait := s.wait
	if bound := min(c.cfg.InjectWait+c.cfg.ReceiptWait+2*c.cfg.SweepEvery, s.limit); s.forwarded && wait < bound {
		wait = bound
	}
	over := false
	hm, err := c.await(ctx, waitSpec{
		st: s.st, d: wait, w: s.w, prog: prog, what: "waiting for a reply from " + s.target.Name,
		receipts: s.receipts,
		onReceipt: func(r *Envelope) bool {
			over = c.applySendReceipt(res, r, s.w == nil)
			return over
		},
		nudged: s.nudged,
		onNudge: func() string {
			if h := c.heldFor(s.st); h != nil {
				return fmt.Sprintf("still waiting for %s; %d other message(s) held for you", s.target.Name, h.Total)
			}
			return ""
		},
	})
	switch {
	case err != nil:
		return nil, err
	case hm != nil && len(c.bodies(s.st, []*heldMsg{hm})) == 1:
		return c.sendAnswered(ctx, s.st, res, hm), nil
	case over:
		queuedNext(res, s.target)
		return res, nil
	}
	return c.sendTimedOut(s, res), nil
}

// applySendReceipt records a receipt of the brief in res and reports
// whether the call is over: FAILED and ABANDONED end it, INJECTED ends it
// when no reply is awaited.
func (c *Core) applySendReceipt(res *Result, r *Envelope, noReply bool) bool {
	switch r.Kind {
	case KindFailed:
		c.endedBy(res, StatusFailed, r)
		return true
	case KindAbandoned:
		c.endedBy(res, StatusAbandoned, r)
		return true
	case KindInjected:
		res.Status, res.Reason = injectedRung(string(r.Body))
		return noReply
	}
	return false
}

// queuedNext says what to do after a brief was queued at its worker's
// pane: its receipt, and any reply, will be held for the caller.
func queuedNext(res *Result, target Entity) {
	if res.Status == StatusQueued {
		res.Next = "bridge_poll(target=" + target.Name + ") later: the brief's receipt (INJECTED or FAILED, corr " + res.MsgID + ") and the reply will be held for you"
	}
}

// sendAnswered hands over the reply (or the ASK) that resolved the send.
func (c *Core) sendAnswered(ctx context.Context, st *entState, res *Result, hm *heldMsg) *Result {
	c.handOver(ctx, st, []*heldMsg{hm})
	res.Messages = []Message{c.handedMessage(hm)}
	res.Held = c.heldBesides(st, []*heldMsg{hm})
	if hm.env.Kind == KindAsk {
		res.Status, res.TurnID = StatusAsked, hm.env.TurnID
		res.Next = "answer with bridge_send(turn_id=" + hm.env.TurnID + ", message)"
	} else {
		res.Status = StatusReplied
	}
	return res
}

// sendTimedOut is the result when the cap ran out: what is known, and what
// to call next.
func (c *Core) sendTimedOut(s *openSend, res *Result) *Result {
	res.Held = c.heldFor(s.st)
	if res.Status == StatusQueued {
		queuedNext(res, s.target)
		return res
	}
	if s.forwarded && res.Status == StatusConfirmed {
		// not a guess either way: the receipt (or the FAILED the
		// sweeper sends when it never comes) will be held for the caller
		res.Reason = "no receipt from " + s.target.Name + "'s pane yet; its outcome (INJECTED or FAILED) will be held for you"
		res.Next = "bridge_poll(target=" + s.target.Name + ") later"
		return res
	}
	res.Reason = "no reply yet"
	res.Next = "bridge_poll(target=" + s.target.Name + ", " + waitArg(s.limit) + ") later"
	if res.Status == StatusConfirmed || res.Status == StatusInjected {
		res.Status = StatusPending
	}
	return res
}

// BroadcastRequest is bridge_broadcast.
type BroadcastRequest struct {
	Message   string
	Group     string // "" or "all": everyone
	RequestID string // optional: a repeat within RequestMemory publishes nothing
}

// Broadcast is bridge_broadcast: one publish, copied into every bound inbox
// but the sender's.
func (c *Core) Broadcast(ctx context.Context, gid string, req BroadcastRequest) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(req.Message); err != nil {
		return nil, err
	}
	if group := req.Group; group != "" && group != "all" && !ValidGroup(group) {
		return nil, userErr("group %s is not valid: lowercase letters, digits, '_' or '-', at most %d bytes", Clip(group), MaxGroupBytes)
	}
	if err := c.briefRefused(st.view(), "broadcast"); err != nil {
		return nil, err
	}
	return c.idempotent(ctx, st, req.RequestID, "bridge_broadcast", []string{req.Message, req.Group},
		func(ctx context.Context) (*Result, error) { return c.broadcast(ctx, gid, req) },
		func(_ context.Context, call *reqCall) (*Result, error) { return c.dedupResult(st, call.rec), nil })
}

func (c *Core) broadcast(ctx context.Context, gid string, req BroadcastRequest) (*Result, error) {
	key := BroadcastKey(req.Group)
	env := c.newEnv(KindBroadcast, gid, key, []byte(req.Message), c.cfg.MessageTTL)
	env.TraceID = uuid.NewString()
	if resumed := resumedFor(ctx, KindBroadcast); resumed != nil {
		env.MsgID, env.TraceID = resumed.MsgID, resumed.TraceID
	}
	spooled, err := c.publishSpool(ctx, key, env, false)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return nil, userErr("broadcast to %s: %v; send it again once the broker is back", key, err)
		}
		return nil, fmt.Errorf("bridge: broadcast: %w", err)
	}
	c.log.Info("broadcast", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, gid, LogTo, key)
	res := &Result{Status: StatusConfirmed, MsgID: env.MsgID, TraceID: env.TraceID, Target: key}
	if spooled {
		res.Status = StatusQueued
		res.Reason = "delivered on this host; the broker is unreachable: the copies for other hosts are kept at this gateway and published when the broker returns"
	}
	return res, nil
}
