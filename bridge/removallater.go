package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Step 3 past its bound. A closed inbox that still holds messages after
// RemovalDrainBound is one its transport is not handing over: a broker
// cut (the count waits for the link), or a consumer that took copies it
// could not settle. Deleting it then would delete messages whose senders
// were told confirmed and will never hear of them again. So the caller is
// answered, and the drain goes on in the background until the inbox is
// empty — each pass hands back what its consumer holds, so what it could
// not report comes again — then step 4 runs. A close stops it; the
// entity's record still says "removing", so the next start finishes it.

// drainUnfinished is closeAndDrain's answer when its bound passed with
// messages still in the inbox.
type drainUnfinished struct{ left int }

func (e *drainUnfinished) Error() string {
	return fmt.Sprintf("%d message(s) still in the closed inbox", e.left)
}

// drainGoesOn takes over a drain that err says outlived its bound, in the
// background; false for any other error.
func (c *Core) drainGoesOn(st *entState, err error) bool {
	var u *drainUnfinished
	if !errors.As(err, &u) {
		return false
	}
	c.log.Warn("an inbox being removed still holds messages after the drain bound: it stays closed and its drain goes on in the background, each message reported to its sender as its transport hands it over; the removal finishes then (or at the next start)",
		LogGID, st.GID, "name", st.Name, "left", u.left, "bound", c.cfg.RemovalDrainBound)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.finishDrainLater(st)
	}()
	return true
}

// finishDrainLater repeats step 3 until the inbox is empty, then step 4.
func (c *Core) finishDrainLater(st *entState) {
	for pass := 1; ; pass++ {
		if c.ctx.Err() != nil { // the record says "removing": the next start finishes
			c.stopConsumer(st)
			return
		}
		c.bounceConsumer(st)
		err := c.closeAndDrain(c.ctx, st, removalSlowPoll)
		var u *drainUnfinished
		if errors.As(err, &u) {
			c.log.Debug("an inbox being removed still holds messages", LogGID, st.GID, "left", u.left, "pass", pass)
			continue
		}
		if err != nil {
			c.stopConsumer(st)
			if c.ctx.Err() == nil {
				c.log.Warn("draining the inbox of a removed entity failed: the removal is finished at the next start", LogGID, st.GID, "name", st.Name, "err", err)
			}
			return
		}
		break
	}
	if err := c.forgetWhenSettled(context.WithoutCancel(c.ctx), st); err != nil {
		c.log.Warn("finishing the removal of an entity failed", LogGID, st.GID, "err", err)
		return
	}
	c.log.Info("removal finished: its inbox is empty", LogGID, st.GID, "name", st.Name)
}

// bounceConsumer replaces st's consumer, so that what the last one was
// handed and did not settle comes back to be reported — unless a call
// holds copies: its ack must land on the consumer it came from.
func (c *Core) bounceConsumer(st *entState) {
	if c.callsHoldCopies(st) {
		return
	}
	c.stopConsumer(st)
	if err := c.restartConsumer(st); err != nil {
		c.log.Warn("the consumer of an inbox being removed could not be restarted: trying again", LogGID, st.GID, "err", err)
		time.Sleep(removalSlowPoll)
	}
}
