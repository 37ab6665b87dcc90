package bridge

import (
	"context"
	"time"
)

// waitSpec is what a blocking call waits for. Every blocking tool call —
// an open send, a poll, an ask, a spawn — waits through Core.await.
type waitSpec struct {
	st *entState
	d  time.Duration // the cap: then await returns nil, nil
	// w is resolved by one arriving message (a reply, an ASK, a drained
	// message); nil: none.
	w *waiter
	// receipts carries the notices about the call's own message; onReceipt
	// handles one and reports whether the wait is over.
	receipts  <-chan *Envelope
	onReceipt func(*Envelope) bool
	// done is checked first and on every wake; true ends the wait.
	done func() bool
	wake <-chan struct{}
	// every re-checks done this often (0: only on wake).
	every time.Duration
	// nudged says something else was held meanwhile; onNudge gives the
	// progress text for it ("" for none).
	nudged  <-chan struct{}
	onNudge func() string
	prog    Progress
	what    string // progress text while waiting
}

// await blocks until spec.w is resolved (the message is returned), the
// wait is over by done or onReceipt (nil, nil), the cap runs out (nil, nil,
// unless a message resolved w meanwhile), or ctx ends (its error; a message
// that resolved w goes back to held).
func (c *Core) await(ctx context.Context, spec waitSpec) (*heldMsg, error) {
	var replies chan *heldMsg // nil (never ready) without a waiter
	if spec.w != nil {
		replies = spec.w.ch
	}
	timer := time.NewTimer(spec.d)
	defer timer.Stop()
	tick := time.NewTicker(c.cfg.ProgressEvery)
	defer tick.Stop()
	var recheck <-chan time.Time
	if spec.every > 0 {
		t := time.NewTicker(spec.every)
		defer t.Stop()
		recheck = t.C
	}
	start := time.Now()
	progress := func(msg string) {
		if spec.prog != nil && msg != "" {
			spec.prog(time.Since(start), spec.d, msg)
		}
	}
	for {
		if spec.done != nil && spec.done() {
			return nil, nil
		}
		select {
		case hm := <-replies:
			if err := ctx.Err(); err != nil {
				c.unclaim(spec.st, []*heldMsg{hm})
				return nil, err
			}
			return hm, nil
		case r := <-spec.receipts:
			c.receiptTaken(spec.st, r)
			if spec.onReceipt(r) {
				return nil, nil
			}
		case <-spec.wake:
		case <-recheck:
		case <-spec.nudged:
			progress(spec.onNudge())
		case <-tick.C:
			progress(spec.what)
		case <-timer.C:
			return c.endWait(spec.st, spec.w, ctx.Err())
		case <-ctx.Done():
			return c.endWait(spec.st, spec.w, ctx.Err())
		}
	}
}

// receiptTaken settles r, a receipt the call just read from a kept box:
// the call has it now, so it is taken into the seen-set and acked.
func (c *Core) receiptTaken(st *entState, r *Envelope) {
	if st == nil {
		return
	}
	if a := st.receiptRead(r); a != nil {
		c.mem.markEnv(st.GID+r.MsgID, r)
		if err := a.Ack(); err != nil {
			c.log.Debug("ack of a receipt a call read failed: a copy comes back and is dropped as seen", LogMsgID, r.MsgID, "err", err)
		}
	}
}

// endWait closes w when its wait ends. A message that resolved it
// meanwhile is returned — or, when the call is cancelled (cause), given
// back to held.
func (c *Core) endWait(st *entState, w *waiter, cause error) (*heldMsg, error) {
	if w == nil || !st.close(w) {
		return nil, cause
	}
	select {
	case hm := <-w.ch: // claimed under the lock: it is in the buffer
		if cause != nil {
			c.unclaim(st, []*heldMsg{hm})
			return nil, cause
		}
		return hm, nil
	default: // dropped without a message: entity removed or core closed
		return nil, cause
	}
}
