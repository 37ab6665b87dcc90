package bridge

import (
	"context"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Repeats of idempotent calls (requests.go): what a call with a request_id
// already used gets. A retrying client gave up on its first call and needs
// that call's outcome, so a repeat answers with the message's current
// status at once — and where the first call was waiting and no call waits
// any more (it was cut by a gateway restart or a cancelled client), the
// repeat takes up that wait, so the retried call ends as the first would
// have. It never joins a call still open: a reply can resolve only one
// waiter, and the retrying client is not listening on the old call.

// repeatSend answers a repeated bridge_send: the message's status, and for
// a brief whose call waited for a reply that has not come, the wait
// resumed.
func (c *Core) repeatSend(ctx context.Context, st *entState, call *reqCall, req SendRequest, prog Progress) (*Result, error) {
	rec := call.rec
	res := c.dedupResult(st, rec)
	if req.Wait <= 0 || Kind(rec.Kind) != KindSend || call.peers > 0 || statusRank(rec.Status) == 3 {
		return res, nil
	}
	target, err := c.Resolve(rec.To)
	if err != nil {
		return res, nil // the worker is gone: what is known is all there is
	}
	s := &openSend{st: st, target: target, wait: c.capWait(ctx, req.Wait), limit: c.maxWait(ctx), nudged: make(chan struct{}, 1),
		env: &Envelope{Kind: KindSend, MsgID: rec.MsgID, TraceID: rec.TraceID}}
	// its receipt is still to come — soon, unless the brief waits in its
	// pane's queue (then the wait is the caller's, not stretched for it)
	s.forwarded = c.ledger.awaiting(rec.MsgID) && rec.Status != StatusQueued
	s.receipts, s.done = st.expectReceiptKept(rec.MsgID)
	s.w = s.replyWaiter()
	st.mu.Lock()
	st.addWaiter(s.w)
	st.mu.Unlock()
	defer c.closeSend(s)
	res.Next = ""
	return c.awaitSend(ctx, s, res, prog)
}

// repeatAsk answers a repeated bridge_ask: the ask's status, and while its
// turn is open and no call waits on it, the wait resumed (as
// bridge_ask(turn_id) would).
func (c *Core) repeatAsk(ctx context.Context, st *entState, call *reqCall, req AskRequest, prog Progress) (*Result, error) {
	st.mu.Lock()
	t := st.asks[call.rec.TurnID]
	st.mu.Unlock()
	if t == nil || call.peers > 0 {
		return c.dedupResult(st, call.rec), nil
	}
	return c.awaitAnswer(ctx, st, t, req.Wait, prog)
}

// dedupResult answers a repeat from what is remembered of its call.
func (c *Core) dedupResult(st *entState, rec store.Request) *Result {
	res := &Result{Status: rec.Status, MsgID: rec.MsgID, TraceID: rec.TraceID, TurnID: rec.TurnID, Target: rec.Target, Reason: rec.Reason}
	if res.Target == "" && !IsBroadcastKey(rec.To) {
		res.Target = c.addrOf(rec.To)
	} else if res.Target == "" {
		res.Target = rec.To
	}
	if statusRank(rec.Status) < 3 {
		switch Kind(rec.Kind) {
		case KindSend:
			res.Next = "bridge_poll(target=" + res.Target + ", " + waitArg(c.cfg.MaxWait) + ") for the reply"
		case KindAsk:
			res.Next = "bridge_ask(turn_id=" + rec.TurnID + ") to keep waiting on the same ask"
		}
	}
	res.Held = c.heldFor(st)
	return res
}
