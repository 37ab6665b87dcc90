package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Removal: the one way an entity ends — bridge_stop (stop.go), the reaper
// (reap.go), `herdbridge remove` and its pane closing (register.go). Its
// inbox is closed before it is emptied, so a message accepted at the same
// moment as the removal is never deleted with the inbox without a fate:
//
//  1. Under regMu and the entity's lock it is marked removed and dropped
//     from the registry (a local send to it is refused from now on), its
//     turns and the brief it worked on become ABANDONED for their
//     counterparts, and its record in the store says it is being removed —
//     a crash from here on is finished by the next start (resumeRemovals),
//     never undone.
//  2. What it held is reported (fate.go): FAILED to each sender, a line in
//     the dead-letter log each; then acked and deleted. What a call had
//     claimed stays with that call: handed over, it is delivered; given
//     back, it is reported (unclaim).
//  3. Its inbox is closed (Transport.CloseInbox: nothing more is routed
//     into it; a sender elsewhere gets "unroutable") and its consumer,
//     still attached, takes what is left: every arrival for an entity
//     being removed is reported, then acked (admit). The inbox is deleted
//     only once it reports nothing waiting with no consumer attached; past
//     RemovalDrainBound the caller is answered and this step goes on in
//     the background (removallater.go).
//  4. Its held records, its presence, its record, its spawn slot and its
//     history go.

// DefaultRemovalDrainBound is Config.RemovalDrainBound's default: how
// long a removal's caller waits for step 3. Nothing can enter a closed
// inbox, so only what was in it has to be taken; the bound is reached
// only when the transport does not hand it over (a broker cut, a stuck
// consumer). Then the caller is answered and step 3 goes on in the
// background (finishDrainLater): what is left is reported as its
// transport hands it back, never deleted unreported.
const DefaultRemovalDrainBound = 30 * time.Second

// removalPoll is how often step 3 counts what is left; past its bound,
// in the background, it counts every removalSlowPoll.
const (
	removalPoll     = 5 * time.Millisecond
	removalSlowPoll = time.Second
)

// leaving remembers why each entity being removed goes, for arrivals that
// find it gone from the registry. Its lock is a leaf.
type leaving struct {
	mu leafMutex
	m  map[string]departure
}

// departure is why an entity goes, and the entity itself: what its calls
// still hold stays in its held set until they settle it (removalclaims.go).
type departure struct {
	addr, cause, why string
	st               *entState
}

func (l *leaving) add(gid string, d departure) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]departure{}
	}
	l.m[gid] = d
}

func (l *leaving) get(gid string) (departure, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.m[gid]
	return d, ok
}

func (l *leaving) done(gid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, gid)
}

// decideRemoval says, under the entity's lock, whether st is still to be
// removed (a reaper checks it is still idle) and why: the sentence its
// counterparts read.
type decideRemoval func(st *entState) (why string, ok bool)

// removeEntity removes st (cause: stopped, reaped, removed, pane closed)
// if decide still says so. It returns how many senders of held messages
// were told FAILED, and false when st was gone already or decide said no.
func (c *Core) removeEntity(ctx context.Context, st *entState, cause string, decide decideRemoval) (int, bool, error) {
	ctx = context.WithoutCancel(ctx) // half a removal helps nobody: a caller that goes away does not stop it
	held, why, ok, err := c.markRemoved(st, cause, decide)
	if !ok {
		return 0, false, err
	}
	queue := "inbox of " + st.Addr()
	us := make([]undelivered, 0, len(held))
	for _, hm := range held {
		us = append(us, undeliveredHeld(hm, st.GID, queue, cause, why))
	}
	told, unsent := c.reportOrKeep(us)
	if err := c.settleTaken(st, without(held, unsent)); err != nil {
		c.log.Warn("reported messages of a removed entity not settled: they come back and are dropped as reported", LogGID, st.GID, "err", err)
	}
	if len(unsent) > 0 { // kept, with the inbox and the record that says "removing": the next start reports them
		return told, true, fmt.Errorf("bridge: remove %s: %d of its senders could not be told FAILED: its removal is finished at the next start", st.Name, len(unsent))
	}
	if err := c.closeAndDrain(ctx, st, removalPoll); err != nil {
		if c.drainGoesOn(st, err) {
			return told, true, nil
		}
		return told, true, fmt.Errorf("bridge: empty the inbox of %s: %w", st.Name, err)
	}
	return told, true, c.forgetWhenSettled(ctx, st)
}

// without is held less the messages whose msgId is in ids.
func without(held []*heldMsg, ids map[string]bool) []*heldMsg {
	if len(ids) == 0 {
		return held
	}
	out := make([]*heldMsg, 0, len(held))
	for _, hm := range held {
		if !ids[hm.head.msgID()] {
			out = append(out, hm)
		}
	}
	return out
}

// markRemoved is step 1: it returns what st held unclaimed (now claimed by
// the removal) and why it goes.
func (c *Core) markRemoved(st *entState, cause string, decide decideRemoval) ([]*heldMsg, string, bool, error) {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	st.mu.Lock()
	why, ok := "", !st.removed
	if ok {
		why, ok = decide(st)
	}
	if !ok {
		st.mu.Unlock()
		return nil, "", false, nil
	}
	st.setGoneWhy(why)
	out := c.abandonTurns(st)
	st.forgetTurns()
	if b := st.brief; b.from != "" { // the brief it was working on will get no reply
		out = append(out, c.notice(KindAbandoned, st.GID, b.from, b.msgID, "", b.traceID, why+" before replying"))
	}
	held := st.claimUnclaimed(nil)
	st.setRemoved()
	c.reg.drop(st, st.tokens)
	st.dropWaiters() // open calls run out on their own timers
	rec := st.record()
	rec.RemovingCause, rec.Removing = cause, why
	st.mu.Unlock()
	c.gone.add(st.GID, departure{addr: st.Addr(), cause: cause, why: why, st: st})
	c.publishAll(out)
	if err := c.st.PutEntity(rec); err != nil {
		// removed in memory all the same: a crash now brings it back whole,
		// with what it held (reported already: its senders may hear twice)
		c.log.Warn("could not mark an entity as being removed in the store", LogGID, st.GID, "err", err)
	}
	return held, why, true, nil
}

// closeAndDrain is step 3: close the inbox, let its consumer report what
// is left, and stop it once nothing waits — counted again with no
// consumer attached, since a transport cannot count what its consumer has
// been handed but not yet settled (cancelling returns those to the inbox).
// What calls still hold is not waited for: the transport counts those
// copies too, but their fate is the calls' (removalclaims.go), and a
// stalled reader must not hold a `bridge_stop` for the whole bound. While
// a call holds one, the consumer stays attached, so the call's ack still
// lands; step 4 stops it once the calls settled.
func (c *Core) closeAndDrain(ctx context.Context, st *entState, poll time.Duration) error {
	deadline := time.Now().Add(c.cfg.RemovalDrainBound)
	for {
		n, err := c.waitingUnclaimed(ctx, st)
		if err != nil {
			return err
		}
		if n == 0 {
			if c.callsHoldCopies(st) {
				return nil
			}
			c.stopConsumer(st)
			if n, err = c.waitingUnclaimed(ctx, st); err != nil || n == 0 {
				return err
			}
			if err := c.restartConsumer(st); err != nil {
				return err
			}
		}
		if c.ctx.Err() != nil { // closing: its consumer goes too (Close cancels only registered ones), the next start finishes
			c.stopConsumer(st)
			return fmt.Errorf("the gateway is closing with %d message(s) left: the removal is finished at the next start", n)
		}
		if time.Now().After(deadline) {
			return &drainUnfinished{left: n}
		}
		select { // a close is seen at the next count
		case <-time.After(poll):
		case <-c.ctx.Done():
		}
	}
}

// forgetWhenSettled is step 4 once no call holds a message of st: what a
// call was handed and has not settled (a stalled reader) keeps its store
// copy until the call settles it — delivered, or given back and reported
// (reportGivenBack) — because a report the call cannot send (its gateway
// closing) is made from that copy by the next start. The removal does not
// wait for it: step 4 runs in the background once the calls settled
// (bounded by the delivery lease plus step 3's bound), or is left to the
// next start if the gateway closes.
func (c *Core) forgetWhenSettled(ctx context.Context, st *entState) error {
	if c.claimedOf(st) == 0 {
		return c.drainAndForget(ctx, st)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// past the delivery lease every handover has been given back; a
		// call that still holds a message then is stuck, and the removal
		// goes on without it (its departure goes too: a copy the transport
		// hands back afterwards is no longer recognized as the call's)
		deadline := time.Now().Add(c.cfg.DeliveryLease + c.cfg.RemovalDrainBound)
		for n := c.claimedOf(st); n > 0; n = c.claimedOf(st) {
			if c.ctx.Err() != nil { // the record still says "removing": the next start finishes it
				c.stopConsumer(st) // Close cancels only registered consumers
				return
			}
			if time.Now().After(deadline) {
				c.log.Error("calls did not settle what they held of a removed entity in time: its store copies go, the calls still settle them", LogGID, st.GID, "name", st.Name, "claimed", n)
				break
			}
			time.Sleep(removalPoll)
		}
		if err := c.drainAndForget(ctx, st); err != nil {
			c.log.Warn("finishing the removal of an entity failed", LogGID, st.GID, "err", err)
		}
	}()
	return nil
}

// claimedOf counts the messages of st that calls hold and have not settled.
func (c *Core) claimedOf(st *entState) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.claimedHeld()
}

// stopConsumer cancels st's consumer, if any.
func (c *Core) stopConsumer(st *entState) {
	st.mu.Lock()
	sub := st.takeSub()
	st.mu.Unlock()
	if sub != nil {
		sub.Cancel()
	}
}

// restartConsumer attaches a consumer to st's closed inbox again, to take
// what cancelling the last one returned to it.
func (c *Core) restartConsumer(st *entState) error {
	gid := st.GID
	sub, err := c.tr.Consume(c.ctx, gid, c.cfg.Prefetch, func(d Delivery) { c.deliver(gid, d) })
	if err != nil {
		return err
	}
	st.mu.Lock()
	st.setSub(sub)
	st.mu.Unlock()
	return nil
}

// forgetEntity is step 4.
func (c *Core) forgetEntity(ctx context.Context, st *entState) error {
	gid := st.GID
	defer c.gone.done(gid)
	if err := c.tr.DeleteInbox(ctx, gid); err != nil {
		return fmt.Errorf("bridge: delete inbox of %s: %w", st.Name, err)
	}
	if err := c.st.DropHeld(gid); err != nil {
		return fmt.Errorf("bridge: delete what was held for %s: %w", st.Name, err)
	}
	c.publishPresence([]Presence{{GID: gid, Name: st.Name, Host: c.cfg.Host, Gone: true}})
	if err := c.st.DeleteEntity(gid); err != nil {
		return err
	}
	c.recent.forget(gid)
	c.slots.free(gid)  // once it is gone from the store: a restart would count it again
	if c.hist != nil { // its transcript goes with it: nobody can read it any more
		_ = c.hist.Flush(ctx) // what it sent last is not written after the purge
		if _, err := c.hist.Purge(st.Name); err != nil {
			c.log.Warn("history of a removed entity not deleted", LogGID, gid, "err", err)
		}
	}
	if st.PaneID != "" {
		c.queues.wake(st.PaneID) // its queued briefs fail now (FAILED to their senders), not at the next recheck
	}
	return nil
}

// departedName is gid's name, also while or after it is removed (its
// address then, from the removal, or the gid itself).
func (c *Core) departedName(gid string) string {
	if n := c.nameOf(gid); n != "" {
		return n
	}
	if d, ok := c.gone.get(gid); ok {
		return d.addr
	}
	return "worker " + gid
}

// arrivedForGone settles an arrival for an entity that is gone or being
// removed: reported to its sender (once), then acked — recorded before it
// leaves the transport.
func (c *Core) arrivedForGone(gid string, d Delivery) {
	env := d.Env
	if c.takenBefore(gid, d) {
		return
	}
	dep, ok := c.gone.get(gid)
	if ok && dep.st != nil && c.copyOfHeld(dep.st, d) {
		return
	}
	if !ok {
		dep = departure{addr: gid, cause: "gone", why: "recipient " + gid + " was removed from " + c.cfg.Host}
	}
	if _, unsent := c.reportOrKeep([]undelivered{undeliveredEnv(env, gid, "inbox of "+dep.addr, dep.cause, dep.why)}); len(unsent) > 0 {
		return // unacked: it comes back (a removal's drain restarts the consumer, or the next start) and is reported then
	}
	c.ack(d)
}

// takenBefore settles an arrival for a removed entity that took the
// message before (the seen-set remembers it): a copy its transport hands
// back is acked — the entity's ack of it was void, a broker cut between
// its drain and its removal, and the broker queue is emptied when the
// link returns — and any other copy is a replay. Reported, it would be
// the message's second fate.
func (c *Core) takenBefore(gid string, d Delivery) bool {
	if !c.mem.has(gid + d.Env.MsgID) {
		return false
	}
	if d.Redelivered {
		c.ack(d)
	} else {
		c.refuse(d, c.inboxQueue(gid), RefuseReplayed, "msgId already taken")
	}
	return true
}

// resumeRemovals finishes the removals a crash or a stop interrupted: an
// entity whose record says it is being removed is removed now.
func (c *Core) resumeRemovals(pending map[string][2]string) {
	for gid, why := range pending {
		st := c.reg.get(gid)
		if st == nil {
			continue
		}
		cause, sentence := why[0], why[1]
		_, _, err := c.removeEntity(c.ctx, st, cause, func(*entState) (string, bool) { return sentence, true })
		if err != nil && !errors.Is(err, context.Canceled) {
			c.log.Warn("finishing the removal of an entity failed", LogGID, gid, "err", err)
			continue
		}
		c.log.Info("removal finished after a restart", LogGID, gid, "name", st.Name, "cause", cause)
	}
}
