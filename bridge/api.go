package bridge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Statuses carried by tool results.
const (
	StatusConfirmed       = "confirmed"        // the transport accepted it
	StatusInjected        = "injected"         // typed into the worker's pane
	StatusSubmitted       = "submitted"        // the worker started the turn
	StatusUncertain       = "uncertain"        // typed, turn start not observed
	StatusReplied         = "replied"          // an open send got its reply
	StatusAsked           = "asked"            // an open send got an ASK instead
	StatusPending         = "pending"          // the wait cap ran out; call again
	StatusAnswered        = "answered"         // an ask got its answer
	StatusDelivered       = "delivered"        // an answer reached the waiting turn
	StatusNoWaiter        = "no_waiter"        // nobody was waiting for the ask
	StatusTooLate         = "too_late"         // the turn no longer waited
	StatusAlreadyAnswered = "already_answered" // the turn took another answer
	StatusAbandoned       = "abandoned"        // the counterpart went away
	StatusExpired         = "expired"          // expiresAt passed
	StatusFailed          = "failed"           // dead-lettered, refused, or not injected
	StatusDrained         = "drained"          // poll returned messages
	StatusPeeked          = "peeked"           // poll peeked without consuming
	StatusEmpty           = "empty"            // poll found nothing
)

// UserError is a mistake the caller can fix; MCP turns it into a tool
// error (isError) carrying Msg.
type UserError struct{ Msg string }

func (e *UserError) Error() string { return e.Msg }

func userErr(format string, a ...any) error { return &UserError{Msg: fmt.Sprintf(format, a...)} }

// Message is a message as a tool result shows it.
type Message struct {
	MsgID    string    `json:"msgId"`
	Kind     Kind      `json:"kind"`
	From     string    `json:"from"`
	FromName string    `json:"fromName"`
	To       string    `json:"to"`
	Body     string    `json:"body"`
	TurnID   string    `json:"turnId,omitempty"`
	Corr     string    `json:"corr,omitempty"` // the msgId this one answers (FAILED, ABANDONED, …)
	TS       time.Time `json:"ts"`
	TraceID  string    `json:"traceId,omitempty"`
}

// Result is the outcome of a tool call.
type Result struct {
	Status   string       `json:"status"`
	MsgID    string       `json:"msgId,omitempty"`
	TraceID  string       `json:"traceId,omitempty"`
	TurnID   string       `json:"turnId,omitempty"`
	SpawnID  string       `json:"spawnId,omitempty"` // bridge_spawn: the new worker's gid
	Target   string       `json:"target,omitempty"`
	Reason   string       `json:"reason,omitempty"`
	Messages []Message    `json:"messages,omitempty"`
	Held     *HeldSummary `json:"held,omitempty"` // what else waits for the caller
	Next     string       `json:"next,omitempty"` // what to call next
}

// Progress is told, while a call waits, how long it has waited of how long.
type Progress func(waited, of time.Duration, msg string)

func (c *Core) message(env *Envelope) Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.messageLocked(env)
}

func (c *Core) caller(gid string) (*entState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.ents[gid]
	if st == nil {
		return nil, userErr("this session's entity is not registered on this gateway: register again")
	}
	return st, nil
}

func (c *Core) checkBody(msg string) error {
	if strings.TrimSpace(msg) == "" {
		return userErr("message is empty")
	}
	if len(msg) > c.cfg.MaxMessageBytes {
		return userErr("message is %d bytes, over the %d-byte limit: shorten it or write it to a file and send the path", len(msg), c.cfg.MaxMessageBytes)
	}
	return nil
}

func (c *Core) publishErr(err error, target Entity) error {
	switch {
	case errors.Is(err, ErrUnroutable):
		return userErr("no inbox for %s: not registered or offline", target.Addr())
	case errors.Is(err, ErrInboxFull):
		return userErr("inbox of %s is full (%d messages unread): it must drain before it can take more", target.Addr(), c.cfg.InboxMaxLength)
	}
	return fmt.Errorf("bridge: publish: %w", err)
}

func (c *Core) capWait(d time.Duration) time.Duration {
	if d > c.cfg.MaxWait {
		return c.cfg.MaxWait
	}
	return d
}

// heldFor returns the caller's held summary, nil when nothing is held.
func (c *Core) heldFor(st *entState) *HeldSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.summaryLocked(st)
	if s.Total == 0 {
		return nil
	}
	return &s
}

// SendRequest is bridge_send.
type SendRequest struct {
	Target  string
	Message string
	Wait    time.Duration
	TurnID  string
}

// Send is bridge_send for the entity gid (SPEC §2).
func (c *Core) Send(ctx context.Context, gid string, req SendRequest, prog Progress) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if err := c.checkBody(req.Message); err != nil {
		return nil, err
	}
	if req.TurnID != "" {
		return c.answer(ctx, st, req)
	}
	target, err := c.Resolve(req.Target)
	if err != nil {
		return nil, err
	}
	if target.GID == gid {
		return nil, userErr("%s is you: send to another entity", req.Target)
	}
	kind := KindReply
	if target.Role == RoleWorker {
		kind = KindSend
	}
	env := c.newEnv(kind, gid, target.GID, []byte(req.Message), c.cfg.MessageTTL)
	c.mu.Lock()
	env.TraceID = uuid.NewString()
	if kind == KindReply && st.brief.from == target.GID {
		env.TraceID = st.brief.traceID
	}
	receipt := make(chan *Envelope, 4)
	st.receipts[env.MsgID] = receipt
	var w *waiter
	nudged := make(chan struct{}, 1)
	wait := c.capWait(req.Wait)
	forwarded := kind == KindSend && (target.Host == c.cfg.Host && target.PaneID != "" && c.cfg.Injector != nil ||
		target.Host != c.cfg.Host && c.remote[target.GID] != nil && c.remote[target.GID].p.Forward)
	if kind == KindSend && wait > 0 {
		w = &waiter{
			ch:     make(chan *heldMsg, 1),
			isSend: true,
			accept: func(e *Envelope) bool {
				return e.Kind == KindAsk || (e.Kind == KindReply || e.Kind == KindSend) && e.From == target.GID
			},
			onHeld: func() {
				select {
				case nudged <- struct{}{}:
				default:
				}
			},
		}
		st.waiters = append(st.waiters, w)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(st.receipts, env.MsgID)
		if w != nil && !w.gone {
			st.removeWaiter(w)
		}
		c.mu.Unlock()
		if w != nil { // a message claimed after the call decided to return goes back
			select {
			case hm := <-w.ch:
				c.unclaim(st, []*heldMsg{hm})
			default:
			}
		}
	}()
	res := &Result{Status: StatusConfirmed, MsgID: env.MsgID, TraceID: env.TraceID, Target: target.Addr()}
	if forwarded { // persisted first: a crash anywhere after still ends in a receipt or a FAILED
		c.awaitReceipt(awaitRecord{MsgID: env.MsgID, From: gid, To: target.GID, ToName: target.Name, TraceID: env.TraceID, Excerpt: Excerpt(req.Message),
			Deadline: c.cfg.Now().Add(c.cfg.InjectWait + c.cfg.ReceiptWait)})
	}
	if err := c.publish(ctx, target.GID, env, true); err != nil {
		if forwarded {
			c.receiptCame(env.MsgID)
		}
		return nil, c.publishErr(err, target)
	}
	c.log.Info("sent", LogKind, kind, LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, gid, LogTo, target.GID)
	if w == nil && !forwarded {
		res.Held = c.heldFor(st)
		return res, nil
	}
	// a forwarded brief's receipt comes within the worker's inject bound
	// plus its travel time (else the sweeper reports it FAILED)
	receiptBound := min(c.cfg.InjectWait+c.cfg.ReceiptWait+2*c.cfg.SweepEvery, c.cfg.MaxWait)
	if forwarded && wait < receiptBound {
		wait = receiptBound
	}
	var replies chan *heldMsg // nil (never ready) when only the receipt is awaited
	if w != nil {
		replies = w.ch
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(c.cfg.ProgressEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case hm := <-replies:
			if ctx.Err() != nil {
				c.unclaim(st, []*heldMsg{hm})
				return nil, ctx.Err()
			}
			c.handOver(ctx, st, []*heldMsg{hm})
			res.Messages = []Message{c.message(hm.env)}
			res.Held = c.heldFor(st)
			if hm.env.Kind == KindAsk {
				res.Status, res.TurnID = StatusAsked, hm.env.TurnID
				res.Next = "answer with bridge_send(target, message, turn_id=" + hm.env.TurnID + ")"
			} else {
				res.Status = StatusReplied
			}
			return res, nil
		case r := <-receipt:
			switch r.Kind {
			case KindFailed:
				res.Status, res.Reason = StatusFailed, string(r.Body)
				return res, nil
			case KindAbandoned:
				res.Status, res.Reason = StatusAbandoned, string(r.Body)
				return res, nil
			case KindInjected:
				res.Status, res.Reason = injectedRung(string(r.Body))
				if w == nil { // no reply to wait for: the receipt was the point
					return res, nil
				}
			}
		case <-nudged:
			if prog != nil {
				if h := c.heldFor(st); h != nil {
					prog(time.Since(start), wait, fmt.Sprintf("still waiting for %s; %d other message(s) held for you", target.Name, h.Total))
				}
			}
		case <-tick.C:
			if prog != nil {
				prog(time.Since(start), wait, "waiting for a reply from "+target.Name)
			}
		case <-timer.C:
			if w != nil {
				c.mu.Lock()
				claimed := w.gone && len(w.ch) > 0
				if !w.gone {
					st.removeWaiter(w)
				}
				c.mu.Unlock()
				if claimed { // a reply or an ASK arrived with the cap: return it
					continue
				}
			}
			if forwarded && res.Status == StatusConfirmed {
				// not a guess either way: the receipt (or the FAILED the
				// sweeper sends when it never comes) will be held for the caller
				res.Reason = "no receipt from " + target.Name + "'s pane yet; its outcome (INJECTED or FAILED) will be held for you"
				res.Next = "bridge_poll(target=" + target.Name + ") later"
				res.Held = c.heldFor(st)
				return res, nil
			}
			res.Reason = "no reply yet"
			res.Next = "bridge_poll(target=" + target.Name + ", wait_s=45) later"
			if res.Status == StatusConfirmed || res.Status == StatusInjected {
				res.Status = StatusPending
			}
			res.Held = c.heldFor(st)
			return res, nil
		case <-ctx.Done():
			if w == nil {
				return nil, ctx.Err()
			}
			c.mu.Lock()
			claimed := w.gone
			if !claimed {
				st.removeWaiter(w)
			}
			c.mu.Unlock()
			if claimed {
				select {
				case hm := <-w.ch:
					c.unclaim(st, []*heldMsg{hm})
				default:
				}
			}
			return nil, ctx.Err()
		}
	}
}

// Excerpt is the start of a message, quoted, for failure reports that must
// say which message failed.
func Excerpt(body string) string {
	body = strings.Join(strings.Fields(body), " ")
	if r := []rune(body); len(r) > 60 {
		body = string(r[:60]) + "…"
	}
	return strconv.Quote(body)
}

// injectedRung reads the rung an INJECTED receipt reports (its body is
// "<status>[: reason]").
func injectedRung(body string) (string, string) {
	status, reason, _ := strings.Cut(body, ": ")
	switch status {
	case StatusInjected, StatusSubmitted, StatusUncertain:
		return status, reason
	}
	return StatusInjected, body
}

// answer is bridge_send with a turn_id: an ANSWER to an open ask.
func (c *Core) answer(ctx context.Context, st *entState, req SendRequest) (*Result, error) {
	c.mu.Lock()
	rt := st.turns[req.TurnID]
	if rt == nil {
		c.mu.Unlock()
		return nil, userErr("no open ask with turn_id %s for you: it expired, was already answered and forgotten, or was never delivered to you", req.TurnID)
	}
	asker := rt.asker
	askerName := c.nameLocked(asker)
	res := &Result{TurnID: rt.turnID, TraceID: rt.traceID}
	switch {
	case rt.abandoned:
		res.Status, res.Reason = StatusAbandoned, "the asker stopped waiting"
	case rt.late:
		res.Status, res.Reason = StatusTooLate, "the asker no longer waited"
	case rt.answered:
		res.Status = StatusAlreadyAnswered
	case false:
		res.Status, res.Reason = StatusAbandoned, "the asker stopped waiting"
	case !c.cfg.Now().Before(rt.expiresAt):
		res.Status, res.Reason = StatusTooLate, "the ask expired"
	}
	if res.Status != "" {
		c.mu.Unlock()
		return res, nil
	}
	c.mu.Unlock()
	if req.Target != "" {
		t, err := c.Resolve(req.Target)
		if err != nil {
			return nil, err
		}
		if t.GID != asker {
			return nil, userErr("turn %s was asked by %s, not %s", req.TurnID, askerName, req.Target)
		}
	}
	env := c.newEnv(KindAnswer, st.GID, asker, []byte(req.Message), c.cfg.MessageTTL)
	env.Corr, env.TurnID, env.TraceID = rt.askMsgID, rt.turnID, rt.traceID
	receipt := make(chan *Envelope, 4)
	c.mu.Lock()
	if rt.answered { // a concurrent answer won
		c.mu.Unlock()
		res.Status = StatusAlreadyAnswered
		return res, nil
	}
	rt.answered = true
	st.receipts[env.MsgID] = receipt
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(st.receipts, env.MsgID)
		c.mu.Unlock()
	}()
	res.MsgID = env.MsgID
	target, _ := c.Resolve(asker)
	if err := c.publish(ctx, asker, env, true); err != nil {
		c.mu.Lock()
		rt.answered = false
		c.mu.Unlock()
		if errors.Is(err, ErrUnroutable) {
			res.Status, res.Reason = StatusAbandoned, "the asker is gone"
			return res, nil
		}
		return nil, c.publishErr(err, target)
	}
	res.Status = StatusConfirmed
	timer := time.NewTimer(c.cfg.ReceiptWait)
	defer timer.Stop()
	select {
	case r := <-receipt:
		switch r.Kind {
		case KindInjected:
			res.Status = StatusDelivered
		case KindTooLate:
			res.Status, res.Reason = StatusTooLate, string(r.Body)
			if string(r.Body) == StatusAlreadyAnswered {
				res.Status, res.Reason = StatusAlreadyAnswered, ""
			} else {
				c.mu.Lock()
				rt.late = true
				c.mu.Unlock()
			}
		case KindAbandoned:
			res.Status, res.Reason = StatusAbandoned, string(r.Body)
			c.mu.Lock()
			rt.abandoned = true
			c.mu.Unlock()
		case KindFailed:
			res.Status, res.Reason = StatusFailed, string(r.Body)
		}
	case <-timer.C:
		res.Reason = "sent; no receipt from the asker's gateway yet"
	case <-ctx.Done():
	}
	return res, nil
}

// AskRequest is bridge_ask.
type AskRequest struct {
	Question string
	Target   string
	Timeout  time.Duration // lifetime of the ask (expiresAt); default AskTTL
	TurnID   string        // resume waiting on this open ask
	Wait     time.Duration // how long this call waits; default and cap MaxWait
}

// Ask is bridge_ask for the entity gid.
func (c *Core) Ask(ctx context.Context, gid string, req AskRequest, prog Progress) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	var t *askTurn
	if req.TurnID != "" {
		c.mu.Lock()
		t = st.asks[req.TurnID]
		c.mu.Unlock()
		if t == nil {
			return nil, userErr("no open ask with turn_id %s: it was never made by you, or it ended more than a minute ago", req.TurnID)
		}
	} else {
		if err := c.checkBody(req.Question); err != nil {
			return nil, err
		}
		var target Entity
		if req.Target != "" {
			if target, err = c.Resolve(req.Target); err != nil {
				return nil, err
			}
		} else {
			c.mu.Lock()
			from := st.brief.from
			c.mu.Unlock()
			if from == "" {
				return nil, userErr("no target: you have no current brief to ask back about; pass target")
			}
			if target, err = c.Resolve(from); err != nil {
				return nil, userErr("the sender of your current brief is gone: pass target")
			}
		}
		if target.GID == gid {
			return nil, userErr("%s is you: ask another entity", target.Name)
		}
		ttl := req.Timeout
		if ttl <= 0 {
			ttl = c.cfg.AskTTL
		}
		env := c.newEnv(KindAsk, gid, target.GID, []byte(req.Question), ttl)
		env.TurnID = uuid.NewString()
		c.mu.Lock()
		env.TraceID = uuid.NewString()
		if st.brief.from == target.GID {
			env.TraceID = st.brief.traceID
		}
		t = &askTurn{turnID: env.TurnID, msgID: env.MsgID, target: target.GID, traceID: env.TraceID, expiresAt: env.ExpiresAt, wake: make(chan struct{}, 1)}
		st.asks[t.turnID] = t
		st.askByMsg[t.msgID] = t
		c.mu.Unlock()
		if err := c.publish(ctx, target.GID, env, true); err != nil {
			c.mu.Lock()
			delete(st.asks, t.turnID)
			delete(st.askByMsg, t.msgID)
			c.mu.Unlock()
			return nil, c.publishErr(err, target)
		}
		c.log.Info("asked", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, gid, LogTo, target.GID, "turnId", env.TurnID)
	}
	wait := req.Wait
	if wait <= 0 {
		wait = c.cfg.MaxWait
	}
	wait = c.capWait(wait)
	res := &Result{MsgID: t.msgID, TurnID: t.turnID, TraceID: t.traceID}
	c.mu.Lock()
	res.Target = c.nameLocked(t.target)
	if st := c.ents[t.target]; st != nil {
		res.Target = st.Addr()
	}
	c.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(c.cfg.ProgressEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		c.mu.Lock()
		status, reason, ans := t.status, t.reason, t.answer
		c.mu.Unlock()
		if status != "" {
			res.Status, res.Reason = status, reason
			if ans != nil {
				res.Messages = []Message{c.message(ans)}
			}
			return res, nil
		}
		select {
		case <-t.wake:
		case <-tick.C:
			if prog != nil {
				prog(time.Since(start), wait, "waiting for an answer from "+res.Target)
			}
		case <-timer.C:
			res.Status = StatusPending
			res.Next = "bridge_ask(turn_id=" + t.turnID + ") to keep waiting on the same ask"
			return res, nil
		case <-ctx.Done():
			var out []outMsg
			c.mu.Lock()
			if t.status == "" {
				t.finish(StatusAbandoned, "the asking call was cancelled")
				out = append(out, c.control(KindAbandoned, gid, t.target, t.msgID, t.turnID, t.traceID, st.Name+" stopped waiting for the answer"))
			}
			c.mu.Unlock()
			c.send(out)
			return nil, ctx.Err()
		}
	}
}

// PollRequest is bridge_poll.
type PollRequest struct {
	Target string
	Wait   time.Duration
	Max    int
	Peek   bool
}

// Poll is bridge_poll for the entity gid: drain held messages, filtered on
// the envelope from when Target is set.
func (c *Core) Poll(ctx context.Context, gid string, req PollRequest, prog Progress) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if req.Max <= 0 {
		req.Max = 50
	}
	if req.Max > 500 {
		req.Max = 500
	}
	from := ""
	if req.Target != "" {
		t, err := c.Resolve(req.Target)
		if err != nil {
			return nil, err
		}
		from = t.GID
	}
	filter := func(e *Envelope) bool { return from == "" || e.From == from }
	res := &Result{}
	if req.Peek {
		c.mu.Lock()
		for _, hm := range st.held {
			if len(res.Messages) < req.Max && !hm.claimed && filter(hm.env) {
				res.Messages = append(res.Messages, c.messageLocked(hm.env))
			}
		}
		c.mu.Unlock()
		res.Status = StatusPeeked
		if len(res.Messages) == 0 {
			res.Status = StatusEmpty
		}
		res.Held = c.heldFor(st)
		return res, nil
	}
	c.mu.Lock()
	taken := claimHeld(st, filter, req.Max)
	var w *waiter
	wait := c.capWait(req.Wait)
	if len(taken) == 0 && wait > 0 {
		w = &waiter{ch: make(chan *heldMsg, 1), accept: func(e *Envelope) bool {
			return filter(e) && (heldKinds[e.Kind] || e.Kind == KindAsk)
		}}
		st.waiters = append(st.waiters, w)
	}
	c.mu.Unlock()
	if w != nil {
		hm, err := c.waitOne(ctx, st, w, wait, prog, "waiting for messages")
		if err != nil {
			return nil, err
		}
		if hm != nil {
			taken = append(taken, hm)
			if hm.env.Kind != KindAsk && req.Max > 1 {
				c.mu.Lock()
				taken = append(taken, claimHeld(st, filter, req.Max-1)...)
				c.mu.Unlock()
			}
		}
	}
	if ctx.Err() != nil {
		c.unclaim(st, taken)
		return nil, ctx.Err()
	}
	c.handOver(ctx, st, taken)
	for _, hm := range taken {
		res.Messages = append(res.Messages, c.message(hm.env))
		if hm.env.Kind == KindAsk {
			res.TurnID = hm.env.TurnID
			res.Next = "answer with bridge_send(target, message, turn_id=" + hm.env.TurnID + ")"
		}
	}
	res.Status = StatusDrained
	if len(taken) == 0 {
		res.Status = StatusEmpty
		if req.Wait > wait { // the cap cut the wait short: say so, and how to go on
			res.Status = StatusPending
			res.Next = "nothing yet: call bridge_poll again to keep waiting"
		} else if wait > 0 {
			res.Next = "nothing yet: call bridge_poll again"
		}
	}
	res.Held = c.heldFor(st)
	return res, nil
}

func (c *Core) messageLocked(env *Envelope) Message {
	m := Message{MsgID: env.MsgID, Kind: env.Kind, From: env.From, To: env.To, Body: string(env.Body), TurnID: env.TurnID, Corr: env.Corr, TS: env.TS.UTC(), TraceID: env.TraceID}
	m.FromName = c.nameLocked(env.From)
	return m
}

// waitOne waits for a waiter to be resolved; nil, nil on timeout.
func (c *Core) waitOne(ctx context.Context, st *entState, w *waiter, wait time.Duration, prog Progress, what string) (*heldMsg, error) {
	var replies chan *heldMsg // nil (never ready) when only the receipt is awaited
	if w != nil {
		replies = w.ch
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(c.cfg.ProgressEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case hm := <-replies:
			return hm, nil
		case <-tick.C:
			if prog != nil {
				prog(time.Since(start), wait, what)
			}
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		c.mu.Lock()
		claimed := w.gone
		if !claimed {
			st.removeWaiter(w)
		}
		c.mu.Unlock()
		if !claimed {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, nil
		}
		var hm *heldMsg
		select {
		case hm = <-w.ch: // claimed under the lock: it is in the buffer
		default: // dropped without a message: entity removed or core closed
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, nil
		}
		if ctx.Err() != nil {
			c.unclaim(st, []*heldMsg{hm})
			return nil, ctx.Err()
		}
		return hm, nil
	}
}

// Broadcast is bridge_broadcast: one publish, copied into every bound inbox
// but the sender's.
func (c *Core) Broadcast(ctx context.Context, gid, message, group string) (*Result, error) {
	if _, err := c.caller(gid); err != nil {
		return nil, err
	}
	if err := c.checkBody(message); err != nil {
		return nil, err
	}
	if group != "" && group != "all" && !ValidGroup(group) {
		return nil, userErr("group %q is not valid: lowercase letters, digits, '_' or '-'", group)
	}
	key := BroadcastKey(group)
	env := c.newEnv(KindBroadcast, gid, key, []byte(message), c.cfg.MessageTTL)
	env.TraceID = uuid.NewString()
	if err := c.publish(ctx, key, env, false); err != nil {
		return nil, fmt.Errorf("bridge: broadcast: %w", err)
	}
	c.log.Info("broadcast", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, gid, LogTo, key)
	return &Result{Status: StatusConfirmed, MsgID: env.MsgID, TraceID: env.TraceID, Target: key}, nil
}

// EntityView is one roster line.
type EntityView struct {
	Entity
	Held     int    `json:"held"`
	Waiting  bool   `json:"waiting"`
	Sessions int    `json:"sessions"`
	Status   string `json:"status"` // the live herdr agent status in a pane (idle|working|blocked|done|unknown), else online | detached
}

// HostView is one host of the roster.
type HostView struct {
	Host     string   `json:"host"`
	Local    bool     `json:"local"`
	Profiles []string `json:"profiles"`
	Key      string   `json:"key,omitempty"` // host key fingerprint (SHA256:…), across hosts
}

// RosterView is bridge_roster.
type RosterView struct {
	Hosts    []HostView   `json:"hosts"`
	Entities []EntityView `json:"entities"`
}

// Roster is the presence view (local host only until presence crosses hosts).
func (c *Core) Roster() RosterView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := RosterView{Hosts: []HostView{{Host: c.cfg.Host, Local: true, Profiles: []string{}, Key: c.cfg.KeyFingerprint}}, Entities: []EntityView{}}
	if c.profiles != nil {
		v.Hosts[0].Profiles = c.profiles()
	}
	for _, st := range c.ents {
		ev := EntityView{Entity: st.snapshot(), Sessions: st.sessions, Waiting: len(st.waiters) > 0, Status: "online"}
		for _, hm := range st.held {
			if !hm.claimed {
				ev.Held++
			}
		}
		if st.sessions == 0 {
			ev.Status = "detached"
		}
		if st.paneStatus != "" {
			ev.Status = st.paneStatus
		}
		v.Entities = append(v.Entities, ev)
	}
	for _, r := range c.remote {
		st := r.p.Status
		if st == "" {
			st = "online"
		}
		v.Entities = append(v.Entities, EntityView{Entity: r.entity(), Status: st})
	}
	for _, h := range c.hosts {
		v.Hosts = append(v.Hosts, HostView{Host: h.p.Host, Profiles: append([]string{}, h.p.Profiles...), Key: h.p.Key})
	}
	sort.Slice(v.Hosts[1:], func(i, j int) bool { return v.Hosts[1+i].Host < v.Hosts[1+j].Host })
	sort.Slice(v.Entities, func(i, j int) bool {
		a, b := v.Entities[i], v.Entities[j]
		return a.Host < b.Host || a.Host == b.Host && a.Name < b.Name
	})
	return v
}

// Resolve finds an entity by name, name@host or gid. An unknown target is a
// UserError that names it and lists close matches.
func (c *Core) Resolve(target string) (Entity, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return Entity{}, userErr("target is empty: name an entity (name, name@host or gid); bridge_roster lists them")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.ents[target]; st != nil {
		return st.snapshot(), nil
	}
	name, host := target, ""
	if i := strings.LastIndexByte(target, '@'); i >= 0 {
		name, host = target[:i], target[i+1:]
		if host == c.cfg.Host {
			host = ""
		} else if c.hosts[host] == nil && !c.hasRemoteHostLocked(host) {
			return Entity{}, userErr("unknown target %q: no gateway of host %q is present (this is %q); bridge_roster lists the hosts", target, host, c.cfg.Host)
		}
	}
	if gid, ok := c.byName[name]; ok && host == "" {
		return c.ents[gid].snapshot(), nil
	}
	if r, amb := c.remoteLocked(target, name, host); r != nil {
		return r.entity(), nil
	} else if len(amb) > 1 {
		return Entity{}, userErr("target %q is ambiguous: it names %s; say which with name@host", target, strings.Join(amb, ", "))
	}
	var names []string
	for n := range c.byName {
		names = append(names, n)
	}
	for _, r := range c.remote {
		names = append(names, r.p.Name+"@"+r.p.Host)
	}
	if s := closeMatches(name, names); len(s) > 0 {
		return Entity{}, userErr("unknown target %q: did you mean %s?", target, strings.Join(s, ", "))
	}
	return Entity{}, userErr("unknown target %q: no entity of that name; bridge_roster lists who is here", target)
}

func (c *Core) hasRemoteHostLocked(host string) bool {
	for _, r := range c.remote {
		if r.p.Host == host {
			return true
		}
	}
	return false
}

// closeMatches returns up to 3 names within edit distance 2 of s, or that
// contain it, closest first.
func closeMatches(s string, names []string) []string {
	type cand struct {
		n string
		d int
	}
	var cs []cand
	ls := strings.ToLower(s)
	for _, n := range names {
		ln := strings.ToLower(n)
		d := editDistance(ls, ln)
		if d <= 2 || (len(ls) >= 3 && strings.Contains(ln, ls)) {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d || cs[i].d == cs[j].d && cs[i].n < cs[j].n })
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].n)
	}
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
