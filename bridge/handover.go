package bridge

import (
	"context"
	"sync"
	"time"
)

// Handover defers the ack of messages a call hands to its entity until
// there is evidence the client has them (SPEC §4: ack only after the
// client has it). A transport that can tell puts a Handover in the call's
// context and then, once per call, says what became of the result:
//
//   - Ack: the client has it (the same session's next request came, the
//     relay wrote it to the client, the session was closed cleanly). The
//     messages are acked.
//   - Return(seen): the result never reached the client (seen false: not
//     written, or the call was cancelled before it was), or it may have
//     (seen true: a write that failed part way, no evidence within the
//     lease). The messages go back to held; seen ones are flagged
//     redelivered when they are handed over again.
//   - Lease: the result was written and evidence is awaited. Without Ack or
//     Return within the lease bound (Config.DeliveryLease) the messages go
//     back to held as Return(true) would: a stalled or vanished client
//     cannot pin them.
//
// The first Ack or Return counts; later ones do nothing. Without a
// Handover in the context, messages are acked when the call returns.
type Handover struct {
	mu      sync.Mutex
	commits []func()
	aborts  []func(seen bool)
	bound   time.Duration // the lease, from the Core that handed messages over
	timer   *time.Timer
	done    bool
	acked   bool
	seen    bool
}

type handoverKey struct{}

// WithHandover returns ctx carrying h.
func WithHandover(ctx context.Context, h *Handover) context.Context {
	return context.WithValue(ctx, handoverKey{}, h)
}

// HandoverOf is the Handover a transport put in ctx, or nil: what a
// call's own code hands over with OnSettle settles with the call's result.
func HandoverOf(ctx context.Context) *Handover { return handoverFrom(ctx) }

func handoverFrom(ctx context.Context) *Handover {
	h, _ := ctx.Value(handoverKey{}).(*Handover)
	return h
}

func (h *Handover) add(commit func(), abort func(seen bool), bound time.Duration) {
	h.mu.Lock()
	if h.done {
		acked, seen := h.acked, h.seen
		h.mu.Unlock()
		if acked {
			commit()
		} else {
			abort(seen)
		}
		return
	}
	h.commits = append(h.commits, commit)
	h.aborts = append(h.aborts, abort)
	if h.bound == 0 || bound < h.bound {
		h.bound = bound
	}
	h.mu.Unlock()
}

// Holds reports whether the call handed anything over that is not settled
// yet: only then does a transport need to keep h.
func (h *Handover) Holds() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.done && len(h.commits) > 0
}

// Lease starts the bound within which Ack must come (the result was
// written); without it the messages return to held, flagged redelivered.
// It reports whether anything is leased. A second Lease does nothing.
func (h *Handover) Lease() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || len(h.commits) == 0 {
		return false
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.bound, func() { h.Return(true) })
	}
	return true
}

// Ack settles what the call handed over as delivered: acked.
func (h *Handover) Ack() { h.finish(true, false) }

// Return sends what the call handed over back to held; seen says the
// client may have read it (then it is flagged redelivered).
func (h *Handover) Return(seen bool) { h.finish(false, seen) }

// Settle acks (delivered) or returns unseen (not delivered) what the call
// handed over: for a transport that knows at once.
func (h *Handover) Settle(delivered bool) { h.finish(delivered, false) }

func (h *Handover) finish(acked, seen bool) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return
	}
	h.done, h.acked, h.seen = true, acked, seen
	if h.timer != nil {
		h.timer.Stop()
	}
	commits, aborts := h.commits, h.aborts
	h.commits, h.aborts = nil, nil
	h.mu.Unlock()
	if acked {
		for _, f := range commits {
			f()
		}
		return
	}
	for _, f := range aborts {
		f(seen)
	}
}

// handOver gives hms to the entity: acked now, or once the transport has
// evidence the client has them.
func (c *Core) handOver(ctx context.Context, st *entState, hms []*heldMsg) {
	if len(hms) == 0 {
		return
	}
	// The brief it now works on (default ask target, reply trace) is set
	// before the result goes out: the reply can come back faster than the
	// transport reports the write.
	st.mu.Lock()
	for _, hm := range hms {
		if hm.env.Kind == KindSend {
			st.setBrief(briefRef{from: hm.env.From, msgID: hm.env.MsgID, traceID: hm.env.TraceID})
		}
	}
	st.mu.Unlock()
	commit := func() {
		if err := c.settleTaken(st, hms); err != nil {
			c.log.Warn("ack after handover failed", LogGID, st.GID, "err", err)
		}
		for _, hm := range hms {
			c.observeFor(HopDrain, st.GID, hm.env, "drained", 0)
		}
	}
	if h := handoverFrom(ctx); h != nil {
		h.add(commit, func(seen bool) { c.returnHanded(st, hms, seen) }, c.cfg.DeliveryLease)
		return
	}
	commit()
}

// handedMessage is hm as the result that hands it over shows it: flagged
// redelivered when a client may have read it before.
func (c *Core) handedMessage(hm *heldMsg) Message {
	m := c.message(hm.env)
	m.Redelivered = hm.redelivered
	return m
}

// DefaultDeliveryLease is Config.DeliveryLease's default: long enough for
// a model to think between two tool calls (its next call is the evidence
// over HTTP), short enough that a vanished client's messages come back.
const DefaultDeliveryLease = 5 * time.Minute

// heldBesides is the caller's held summary for a result that hands over
// mine itself: those are not "in flight to another call".
func (c *Core) heldBesides(st *entState, mine []*heldMsg) *HeldSummary {
	s := c.heldFor(st)
	if s == nil {
		return nil
	}
	for _, hm := range mine {
		if hm.head.kind != KindAsk { // an ASK is never in the held set
			s.InFlight--
		}
	}
	s.InFlight = max(s.InFlight, 0)
	if s.Total == 0 && s.InFlight == 0 {
		return nil
	}
	return s
}

// OnSettle adds work to run when h settles: acked, or returned (seen: the
// client may have read the result). It counts as handed over, as the
// core's own messages do, with the default lease.
func (h *Handover) OnSettle(acked func(), returned func(seen bool)) {
	h.add(acked, returned, DefaultDeliveryLease)
}
