package bridge

import (
	"context"
	"time"
)

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
	req.Max = min(max(req.Max, 0), 500)
	if req.Max == 0 {
		req.Max = 50
	}
	filter, err := c.fromFilter(req.Target)
	if err != nil {
		return nil, err
	}
	if req.Peek {
		return c.peek(st, filter, req), nil
	}
	taken, more, err := c.drain(ctx, st, filter, req, prog)
	if err != nil {
		return nil, err
	}
	taken = c.bodies(st, taken)
	res := &Result{Status: StatusDrained}
	for _, hm := range taken {
		res.Messages = append(res.Messages, c.handedMessage(hm))
		if hm.head.kind == KindAsk {
			// an ASK only reaches a poll that waited for it (with nobody
			// waiting it is answered NO_WAITER): the poll was the asker's
			// waiter, as an open send is, and says so the same way
			res.Status, res.TurnID = StatusAsked, hm.env.TurnID
			res.Next = "answer with bridge_send(turn_id=" + hm.env.TurnID + ", message)"
		}
	}
	c.dropBodies(st, taken)
	c.handOver(ctx, st, taken)
	c.drained(resultCost(taken))
	if len(taken) == 0 {
		res.Status = StatusEmpty
		again := pollCall(req.Target, c.maxWait(ctx))
		if wait := c.capWait(ctx, req.Wait); req.Wait > wait { // the cap cut the wait short: say so, and how to go on
			res.Status = StatusPending
			res.Next = "nothing yet: call " + again + " to keep waiting"
		} else {
			res.Next = "nothing held: " + again + " waits for the next message"
		}
	}
	c.sayMore(res, more, req.Target)
	res.Held = c.heldBesides(st, taken)
	return res, nil
}

// pollCall is the bridge_poll call that waits as long as the caller may
// for what target (or anyone) sends next.
func pollCall(target string, wait time.Duration) string {
	if target == "" {
		return "bridge_poll(" + waitArg(wait) + ")"
	}
	return "bridge_poll(target=" + target + ", " + waitArg(wait) + ")"
}

// sayMore tells a result how many more messages matching its poll stay
// held, and how to get them (unless it already says what to do next: an
// ASK to answer).
func (c *Core) sayMore(res *Result, more int, target string) {
	if more == 0 {
		return
	}
	res.More = more
	if res.Next == "" {
		res.Next = c.moreNext(more, target)
	}
}

// fromFilter accepts every message, or with a target only those whose
// envelope from is that entity.
func (c *Core) fromFilter(target string) (func(*Envelope) bool, error) {
	if target == "" {
		return func(*Envelope) bool { return true }, nil
	}
	t, err := c.Resolve(target)
	if err != nil {
		return nil, err
	}
	return func(e *Envelope) bool { return e.From == t.GID }, nil
}

// peek reads held messages without consuming them, as many as a drain
// would take.
func (c *Core) peek(st *entState, filter func(*Envelope) bool, req PollRequest) *Result {
	res := &Result{Status: StatusPeeked}
	var envs []*Envelope
	var seqs []uint64
	var at []int // index in envs of each seq to read
	var scratch Envelope
	b, more := c.newBudget(), 0
	st.mu.Lock()
	for _, hm := range st.held {
		if hm.claimed || !filter(hm.view(&scratch)) {
			continue
		}
		if more > 0 || len(envs) >= req.Max || !b.fits(int(hm.cost)) {
			more++
			continue
		}
		if hm.env == nil {
			seqs, at = append(seqs, hm.seq), append(at, len(envs))
		}
		envs = append(envs, hm.env)
	}
	st.mu.Unlock()
	loaded, _ := c.readHeld(st.GID, seqs) // one drained meanwhile reads nil
	for i, j := range at {
		envs[j] = loaded[i]
	}
	for _, env := range envs {
		if env != nil {
			res.Messages = append(res.Messages, c.message(env))
		}
	}
	if len(res.Messages) == 0 {
		res.Status = StatusEmpty
	}
	c.sayMore(res, more, req.Target)
	res.Held = c.heldFor(st)
	return res
}

// drain claims up to req.Max held messages within the result's byte
// budget; with none held and a wait, it waits for the first to arrive (and
// takes what came with it). more is how many others matching filter stay
// held.
func (c *Core) drain(ctx context.Context, st *entState, filter func(*Envelope) bool, req PollRequest, prog Progress) ([]*heldMsg, int, error) {
	var w *waiter
	wait := c.capWait(ctx, req.Wait)
	b := c.newBudget()
	st.mu.Lock()
	taken, more := st.claimHeld(filter, req.Max, b)
	if len(taken) == 0 && wait > 0 {
		w = &waiter{ch: make(chan *heldMsg, 1), accept: func(e *Envelope) bool {
			// an INJECTED is offered only when it is held (a late or
			// uncertain receipt, one for a queued brief): it ends the wait too
			return filter(e) && (heldKinds[e.Kind] || e.Kind == KindAsk || e.Kind == KindInjected)
		}}
		st.addWaiter(w)
	}
	st.mu.Unlock()
	if w != nil {
		hm, err := c.await(ctx, waitSpec{st: st, d: wait, w: w, prog: prog, what: "waiting for messages"})
		if err != nil {
			return nil, 0, err
		}
		if hm != nil {
			taken = append(taken, hm)
			b.fits(int(hm.cost))
			if hm.head.kind != KindAsk && req.Max > 1 {
				st.mu.Lock()
				var with []*heldMsg
				with, more = st.claimHeld(filter, req.Max-1, b)
				taken = append(taken, with...)
				st.mu.Unlock()
			}
		}
	}
	if err := ctx.Err(); err != nil {
		c.unclaim(st, taken)
		return nil, 0, err
	}
	return taken, more, nil
}
