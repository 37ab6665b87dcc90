package bridge

import (
	"context"
	"sync"
)

// Handover defers the ack of messages a call hands to its entity until the
// transport that carries the call's result has written it (SPEC §4: ack only
// after the client has it). A transport that can tell puts a Handover in
// the call's context and settles it after the write: delivered, the
// messages are acked; not delivered, they go back to held. Without a
// Handover in the context, messages are acked when the call returns.
type Handover struct {
	mu        sync.Mutex
	commits   []func()
	aborts    []func()
	settled   bool
	delivered bool
}

type handoverKey struct{}

// WithHandover returns ctx carrying h.
func WithHandover(ctx context.Context, h *Handover) context.Context {
	return context.WithValue(ctx, handoverKey{}, h)
}

func handoverFrom(ctx context.Context) *Handover {
	h, _ := ctx.Value(handoverKey{}).(*Handover)
	return h
}

func (h *Handover) add(commit, abort func()) {
	h.mu.Lock()
	if h.settled {
		ok := h.delivered
		h.mu.Unlock()
		if ok {
			commit()
		} else {
			abort()
		}
		return
	}
	h.commits = append(h.commits, commit)
	h.aborts = append(h.aborts, abort)
	h.mu.Unlock()
}

// Settle acks (delivered) or returns to held (not delivered) what the call
// handed over. Idempotent: only the first call counts.
func (h *Handover) Settle(delivered bool) {
	h.mu.Lock()
	if h.settled {
		h.mu.Unlock()
		return
	}
	h.settled, h.delivered = true, delivered
	fns := h.aborts
	if delivered {
		fns = h.commits
	}
	h.commits, h.aborts = nil, nil
	h.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// handOver gives hms to the entity: acked now, or once the transport says
// the result was written.
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
			st.brief = briefRef{from: hm.env.From, msgID: hm.env.MsgID, traceID: hm.env.TraceID}
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
		h.add(commit, func() { c.unclaim(st, hms) })
		return
	}
	commit()
}
