package sim

import (
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// bridgePollNow drains without waiting.
var bridgePollNow = bridge.PollRequest{Max: 500}

// quiesceWait bounds the end of a schedule: every fault healed, every
// gateway up, every stalled reader settled, then drains until every
// accepted message has its fate (or this passes).
const quiesceWait = 10 * time.Second

// receiptWait bounds the wait for a typed brief's receipt (the gateways'
// ReceiptWait plus sweeps and travel, with room for -race).
const receiptWait = 3 * time.Second

// quiesce heals everything and drains until the ledger is settled or the
// deadline passes; it reports whether it settled. An action still running
// once every fault is healed is recorded in r.stuck (a breach of its own)
// and the drains go on beside it, so the report shows what its messages
// became rather than counting every one not yet drained as lost.
func (r *runner) quiesce() bool {
	r.step = len(r.sched.Steps)
	for _, g := range r.gws {
		r.disk(g, false)
		g.panes.heal()
		r.link(g, false)
		r.bootIfDown(g)
		if core, _, up := g.snapshot(); up {
			core.PaneStatus("pane"+g.id[1:], "idle")
		}
	}
	if !r.joinStragglers(quiesceWait) {
		r.stuck = r.running.list()
		r.log.Warn("sim: actions still running after every fault healed", "actions", r.stuck)
	}
	r.settleStalled(r.step)
	deadline := time.Now().Add(quiesceWait)
	receiptDeadline := time.Now().Add(receiptWait)
	r.converge(deadline)
	for {
		for _, g := range r.gws {
			r.bootIfDown(g)
		}
		r.answerOwed()
		r.noteLateStops()
		asks := r.resumableAsks()
		for _, a := range asks {
			r.resumeAsk(r.step, a)
		}
		for _, name := range r.order {
			r.drainAll(name)
		}
		receipts := time.Now().Before(receiptDeadline) // past it, a missing receipt is a breach, not worth waiting for
		if r.acct.unsettled(receipts, r.orphanAnswer) == 0 && len(asks) == 0 {
			r.grace()
			return len(r.stuck) == 0
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiesceGrace is how long a settled run still watches: a message
// reported FAILED may yet be delivered (a second fate), and that only
// shows if something looks. It can only find more, never less.
const quiesceGrace = 500 * time.Millisecond

// grace waits quiesceGrace, then drains everything once more.
func (r *runner) grace() {
	time.Sleep(quiesceGrace)
	for _, name := range r.order {
		r.drainAll(name)
	}
}

// drainAll polls name without waiting until it drains nothing.
func (r *runner) drainAll(name string) {
	if !r.ents[name].pulls() {
		return
	}
	for range 20 {
		g, core, epoch, gid, ok := r.actor(name)
		if !ok {
			return
		}
		ctx, cancel := callCtx()
		h := &bridge.Handover{}
		res, err := core.Poll(bridge.WithHandover(ctx, h), gid, bridgePollNow, nil)
		cancel()
		if err != nil {
			h.Settle(false)
			return
		}
		if !g.handOver(epoch, h) || len(res.Messages) == 0 {
			return
		}
		r.acct.drained(r.step, name, res.Messages)
		r.answer(r.step, g, core, epoch, name, gid, res.Messages)
	}
}

// bootIfDown starts g again if a restart left it down (its disk was full).
func (r *runner) bootIfDown(g *gateway) {
	g.life.Lock()
	defer g.life.Unlock()
	if !g.isUp() {
		r.bootOrLog(g)
	}
}

// resumableAsks are the open turns whose asker (the same incarnation) still
// lives to resume them.
func (r *runner) resumableAsks() []ask {
	var out []ask
	for _, a := range r.acct.pendingAsks() {
		if gid, alive := r.ents[a.Asker].state(); alive && gid == a.AskerGID {
			out = append(out, a)
		}
	}
	return out
}

// joinStragglers waits (at most d) for the actions that outlived their
// rounds, now that every link is up again.
func (r *runner) joinStragglers(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		r.stragglers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
