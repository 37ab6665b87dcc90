package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// tagSeq numbers the bodies of a run: every body is unique.
type tagger struct {
	seed uint64
	n    atomic.Int64
}

func (t *tagger) next(what string) string {
	return fmt.Sprintf("sim %d #%d %s", t.seed, t.n.Add(1), what)
}

// runner executes a schedule's rounds on a world.
type runner struct {
	*world
	tags *tagger
	step int
	// stragglers are actions that outlived their round: a removal (a pane
	// closed, a stop) on a gateway cut from the broker waits for the link,
	// which only a later round or the quiescence brings back. Joined once
	// everything is healed.
	stragglers sync.WaitGroup
	running    running  // the actions under way, by step and action
	stuck      []string // what still ran once every fault was healed (quiesce)
}

// roundWait bounds how long a round waits for its actions: longer than any
// call (callWait) with room for a loaded machine.
const roundWait = 4 * callWait

// round runs st's actions concurrently and waits for them all, or
// roundWait: what is still running then goes on beside the next rounds.
func (r *runner) round(st Step) {
	r.step = st.Index
	var wg sync.WaitGroup
	for _, a := range st.Actions {
		wg.Add(1)
		r.stragglers.Add(1)
		what := fmt.Sprintf("step %d: %s", st.Index, a)
		r.running.start(what)
		go func() {
			defer r.stragglers.Done()
			defer wg.Done()
			defer r.running.done(what)
			r.act(st.Index, a)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(roundWait):
		r.log.Warn("sim: a round's actions outlived it (a removal waiting for a cut link?): they go on", "step", st.Index)
	}
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callWait)
}

// actor is the gateway and gid an action's entity acts from, if it lives.
func (r *runner) actor(name string) (*gateway, *bridge.Core, int, string, bool) {
	e := r.ents[name]
	gid, alive := e.state()
	g := r.gws[e.host]
	core, epoch, up := g.snapshot()
	return g, core, epoch, gid, alive && up
}

func (r *runner) act(step int, a Action) {
	switch a.Op {
	case OpSend, OpReply:
		r.send(step, a)
	case OpBroadcast:
		r.broadcast(step, a)
	case OpAsk:
		r.ask(step, a)
	case OpPoll, OpPollAbandon, OpPollStall:
		r.poll(step, a.Actor, a.Op, a.N > 0)
	case OpPause:
		time.Sleep(time.Duration(a.N) * 100 * time.Millisecond)
	case OpSettle:
		r.settleStalled(step)
	case OpRespawn:
		r.respawn(a.Target)
	case OpStop:
		r.stopWorker(step, a)
	case OpRemove, OpPaneClose:
		r.remove(a)
	case OpReap:
		r.reap()
	case OpRestart, OpKill:
		g := r.gws[a.Host]
		g.life.Lock()
		r.stop(g, a.Op == OpKill)
		r.bootOrLog(g)
		g.life.Unlock()
	case OpDiskFull, OpDiskFree:
		r.disk(r.gws[a.Host], a.Op == OpDiskFull)
	case OpCut, OpHeal:
		r.link(r.gws[a.Host], a.Op == OpCut)
	case OpSwallow:
		r.gws[a.Host].panes.swallowNext(r.ents[a.Target].pane, a.N)
	case OpHerdrDown, OpHerdrUp:
		r.gws[a.Host].panes.setDown(a.Op == OpHerdrDown)
		if core, _, up := r.gws[a.Host].snapshot(); up && a.Op == OpHerdrUp {
			core.PaneStatus(fmt.Sprintf("pane%d", a.Host), "idle") // herdr's status event on its return
		}
	}
}

// bootOrLog boots g (g.life held by the caller).
func (r *runner) bootOrLog(g *gateway) {
	if err := r.boot(g); err != nil {
		r.log.Warn("sim: gateway does not start", "host", g.id, "err", err)
	}
}

func (r *runner) send(step int, a Action) {
	g, core, epoch, gid, ok := r.actor(a.Actor)
	if !ok {
		return
	}
	kind, pane := kindSend, r.ents[a.Target].pane != ""
	if a.Op == OpReply {
		kind, pane = kindReply, false
	}
	for range a.N {
		tag := r.tags.next(kind + " " + a.Actor + "->" + a.Target)
		ctx, cancel := callCtx()
		res, err := core.Send(ctx, gid, bridge.SendRequest{Target: r.addr(a.Target), Message: tag}, nil)
		cancel()
		if !g.sameEpoch(epoch) {
			r.acct.discarded(tag)
			return
		}
		r.acct.result(step, kind, tag, a.Actor, a.Target, pane, res, err)
	}
}

func (r *runner) broadcast(step int, a Action) {
	g, core, epoch, gid, ok := r.actor(a.Actor)
	if !ok {
		return
	}
	tag := r.tags.next("broadcast " + a.Actor)
	ctx, cancel := callCtx()
	res, err := core.Broadcast(ctx, gid, bridge.BroadcastRequest{Message: tag})
	cancel()
	if !g.sameEpoch(epoch) {
		r.acct.discarded(tag)
		return
	}
	r.acct.result(step, kindBroadcast, tag, a.Actor, "all", false, res, err)
}

func (r *runner) ask(step int, a Action) {
	g, core, epoch, gid, ok := r.actor(a.Actor)
	if !ok {
		return
	}
	tag := r.tags.next("ask " + a.Actor + "->" + a.Target)
	ctx, cancel := callCtx()
	res, err := core.Ask(ctx, gid, bridge.AskRequest{Question: tag, Target: r.addr(a.Target), Wait: 100 * time.Millisecond}, nil)
	cancel()
	if g.sameEpoch(epoch) {
		r.acct.askResult(step, tag, a.Actor, gid, a.Target, res, err)
	}
}

// resumeAsk waits on an open turn again, as the asker's next call would.
func (r *runner) resumeAsk(step int, a ask) {
	g, core, epoch, gid, ok := r.actor(a.Asker)
	if !ok || gid != a.AskerGID {
		return
	}
	ctx, cancel := callCtx()
	res, err := core.Ask(ctx, gid, bridge.AskRequest{TurnID: a.TurnID, Wait: 50 * time.Millisecond}, nil)
	cancel()
	if g.sameEpoch(epoch) && err == nil {
		r.acct.askResult(step, "", a.Asker, gid, a.Target, res, nil)
	}
}

// poll drains name's held messages: read at once, never read
// (abandoned), or read late (stalled). A primary answers each ASK it
// drained.
func (r *runner) poll(step int, name string, op Op, long bool) {
	g, core, epoch, gid, ok := r.actor(name)
	if !ok || !r.ents[name].pulls() {
		return
	}
	ctx, cancel := callCtx()
	defer cancel()
	h := &bridge.Handover{} // acked once the client read it, as over stdio and streamable HTTP
	ctx = bridge.WithHandover(ctx, h)
	wait := 20 * time.Millisecond
	if long {
		wait = 300 * time.Millisecond
	}
	res, err := core.Poll(ctx, gid, bridge.PollRequest{Wait: wait, Max: 500}, nil)
	if err != nil {
		h.Settle(false)
		return
	}
	switch op {
	case OpPollAbandon:
		h.Settle(false)
		r.acct.count("abandoned polls")
		return
	case OpPollStall:
		r.stallMu.Lock()
		r.stalled = append(r.stalled, stalled{h: h, name: name, gw: g, epoch: epoch, msgs: res.Messages, step: step})
		r.stallMu.Unlock()
		r.acct.count("stalled polls")
		return
	}
	if !g.handOver(epoch, h) {
		return
	}
	r.acct.drained(step, name, res.Messages)
	r.answer(step, g, core, epoch, name, gid, res.Messages)
}

func (r *runner) answer(step int, g *gateway, core *bridge.Core, epoch int, name, gid string, ms []bridge.Message) {
	for i, m := range ms {
		if m.Kind != bridge.KindAsk || m.TurnID == "" {
			continue
		}
		if !r.answerOne(step, g, core, epoch, name, gid, m.TurnID) {
			r.owe(name, ms[i:]) // this one and the rest: answered again in quiesce
			return
		}
	}
}

// owe remembers the asks in ms that name still has to answer.
func (r *runner) owe(name string, ms []bridge.Message) {
	r.stallMu.Lock()
	defer r.stallMu.Unlock()
	for _, m := range ms {
		if m.Kind == bridge.KindAsk && m.TurnID != "" {
			r.unanswered = append(r.unanswered, pendingAnswer{name: name, turnID: m.TurnID})
		}
	}
}

// answerOne answers turnID from name; false when a restart or kill cut the
// call (its result is void: the answer is owed still).
func (r *runner) answerOne(step int, g *gateway, core *bridge.Core, epoch int, name, gid, turnID string) bool {
	tag := r.tags.next("answer " + name)
	ctx, cancel := callCtx()
	res, err := core.Send(ctx, gid, bridge.SendRequest{TurnID: turnID, Message: tag}, nil)
	cancel()
	if !g.sameEpoch(epoch) {
		r.acct.discarded(tag)
		return false
	}
	asker := ""
	r.acct.mu.Lock()
	if a := r.acct.asks[turnID]; a != nil {
		asker = a.Asker
	}
	r.acct.mu.Unlock()
	if err == nil && res.Status == bridge.StatusDelivered {
		res.MsgID = "answer:" + turnID // an answer's result names no msgId of its own
	}
	r.acct.result(step, kindAnswer, tag, name, asker, false, res, err)
	return true
}

// answerOwed answers again the asks whose answer call was cut, each from
// its primary while that one lives.
func (r *runner) answerOwed() {
	r.stallMu.Lock()
	owed := r.unanswered
	r.unanswered = nil
	r.stallMu.Unlock()
	for _, p := range owed {
		g, core, epoch, gid, ok := r.actor(p.name)
		if !ok || !r.answerOne(r.step, g, core, epoch, p.name, gid, p.turnID) {
			r.owe(p.name, []bridge.Message{{Kind: bridge.KindAsk, TurnID: p.turnID}})
		}
	}
}

// settleStalled has every stalled reader read its result at last: its
// messages are delivered — unless its gateway went down meanwhile (the
// connection is gone with it: they come again).
func (r *runner) settleStalled(step int) {
	r.stallMu.Lock()
	ss := r.stalled
	r.stalled = nil
	r.stallMu.Unlock()
	for _, s := range ss {
		if !s.gw.handOver(s.epoch, s.h) {
			continue
		}
		r.acct.drained(step, s.name, s.msgs)
		if _, core, epoch, gid, ok := r.actor(s.name); ok && epoch == s.epoch {
			r.answer(step, s.gw, core, epoch, s.name, gid, s.msgs) // a primary answers the asks it read late
		}
	}
}

func (r *runner) respawn(name string) {
	e := r.ents[name]
	if _, alive := e.state(); alive {
		return
	}
	r.register(r.gws[e.host], e)
}

func (r *runner) stopWorker(step int, a Action) {
	g, core, epoch, gid, ok := r.actor(a.Actor)
	if !ok {
		return
	}
	no := false
	ctx, cancel := callCtx()
	res, err := core.Stop(ctx, gid, bridge.StopRequest{Target: r.addr(a.Target), Reason: fmt.Sprintf("sim step %d", step), ClosePane: &no})
	cancel()
	if err == nil && res.Status == bridge.StatusStopped && g.sameEpoch(epoch) {
		r.gone(a.Target)
		return
	}
	r.stopOrdered(a.Target) // its STOP may yet land (latestop.go)
}

// gone marks a worker removed: nothing more is sent from it, and its
// messages' reports have nowhere to go.
func (r *runner) gone(name string) {
	e := r.ents[name]
	gid, _ := e.state()
	e.set(gid, false)
	r.acct.senderGone(name)
}

func (r *runner) remove(a Action) {
	e := r.ents[a.Target]
	gid, alive := e.state()
	g := r.gws[e.host]
	core, _, up := g.snapshot()
	if !alive || !up {
		return
	}
	ctx, cancel := callCtx()
	defer cancel()
	if a.Op == OpPaneClose {
		core.PaneClosed(ctx, e.pane)
	} else if err := core.Remove(ctx, gid); err != nil {
		return
	}
	if _, still := core.Entity(gid); !still {
		r.gone(a.Target)
	}
}

// reap moves the clock past ReapAfter and waits until every pull worker
// on a running gateway is reaped.
func (r *runner) reap() {
	r.clock.advance(reapAfter + time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range r.order {
		e := r.ents[name]
		gid, alive := e.state()
		if !alive || e.role != bridge.RoleWorker || !e.pulls() {
			continue
		}
		core, _, up := r.gws[e.host].snapshot()
		if !up {
			continue
		}
		for time.Now().Before(deadline) {
			if _, ok := core.Entity(gid); !ok {
				r.gone(name)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (r *runner) disk(g *gateway, full bool) {
	var err error
	if full {
		err = r.disks.Fill(g.id)
	} else {
		err = r.disks.Free(g.id)
	}
	if err != nil {
		r.log.Warn("sim: disk fault", "host", g.id, "err", err)
		return
	}
	g.mu.Lock()
	g.full = full
	g.mu.Unlock()
}

func (r *runner) link(g *gateway, down bool) {
	g.mu.Lock()
	tr, up := g.tr, g.up
	g.cut = down && up
	g.mu.Unlock()
	if !up {
		return
	}
	if down {
		tr.LinkDown()
	} else {
		tr.LinkUp()
	}
}
