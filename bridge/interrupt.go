package bridge

import (
	"context"
	"time"
)

// Interrupt: bridge_interrupt presses Escape in a worker's pane to end the
// turn its agent is working on, and with a message sends that message as
// a brief with priority next (priority.go), typed as soon as the agent is
// idle, before any brief that waited. The result is what was observed:
// interrupted (the agent went from working or a dialog to idle/done),
// uncertain (Escape pressed, no such change seen within the bound),
// not_working (it was not working: nothing pressed) or failed.
//
// Between the Escape and the message's arrival the pane's queue holds
// every other brief back (paneQueues.hold), or the agent going idle would
// let the queue type the brief that waited longest before the message.

// Interrupter is what an Injector may also do (found by type assertion):
// press Escape in a worker's pane.
type Interrupter interface {
	// Interrupt presses Escape once in e's pane if its agent is working
	// (or waits on a dialog), and watches, bounded by ctx, for the status
	// to turn idle or done. Never types anything else.
	Interrupt(ctx context.Context, e Entity) InterruptReceipt
}

// InterruptReceipt is what an interrupt observed.
type InterruptReceipt struct {
	Status string // StatusInterrupted | StatusUncertain | StatusNotWorking | StatusFailed
	Reason string
}

// Interrupt statuses.
const (
	StatusInterrupted = "interrupted" // working (or a dialog) → idle/done after the Escape
	StatusNotWorking  = "not_working" // the agent was not working: nothing pressed
)

// InterruptRequest is bridge_interrupt.
type InterruptRequest struct {
	Target  string
	Message string // optional: the next brief, typed as soon as the agent is idle
}

// Interrupt is bridge_interrupt for the entity caller.
func (c *Core) Interrupt(ctx context.Context, caller string, req InterruptRequest, prog Progress) (*Result, error) {
	st, err := c.caller(caller)
	if err != nil {
		return nil, err
	}
	if req.Message != "" {
		if err := c.checkBody(req.Message); err != nil {
			return nil, err
		}
	}
	target, err := c.Resolve(req.Target)
	if err != nil {
		return nil, err
	}
	by := st.view()
	if err := mayControl("bridge_interrupt", by, target); err != nil {
		return nil, err
	}
	if req.Message != "" && target.GID == by.GID {
		return nil, userErr("a message to yourself cannot be sent: interrupt yourself without one")
	}
	var res *Result
	if target.Host != c.cfg.Host {
		res, err = c.controlCall(ctx, st, target, KindInterrupt, InterruptBody{Target: target.GID, Next: req.Message != ""})
	} else {
		res, err = c.interruptLocal(ctx, target, req.Message != "")
	}
	if err != nil || req.Message == "" {
		return res, err
	}
	if res.Status == StatusFailed || res.Status == StatusPending {
		res.Next = "the message was not sent: bridge_send(target=" + target.Name + ", priority=\"next\") queues it before the worker's other briefs"
		return res, nil
	}
	return c.sendNext(ctx, caller, target, req.Message, res, prog), nil
}

// sendNext sends message to target with priority next after an interrupt,
// and adds what became of it to res.
func (c *Core) sendNext(ctx context.Context, caller string, target Entity, message string, res *Result, prog Progress) *Result {
	sent, err := c.Send(ctx, caller, SendRequest{Target: target.GID, Message: message, Priority: PriorityNext}, prog)
	if err != nil {
		res.Reason += "; the message was not sent: " + err.Error()
		res.Next = "send it again with bridge_send(target=" + target.Name + ", priority=\"next\")"
		return res
	}
	res.MsgID, res.TraceID = sent.MsgID, sent.TraceID
	res.Reason += "; the message (msgId " + sent.MsgID + ") jumps the queue: " + sent.Status
	if sent.Reason != "" {
		res.Reason += " (" + sent.Reason + ")"
	}
	res.Messages, res.Held, res.Next = sent.Messages, sent.Held, sent.Next
	return res
}

// interruptHold bounds how long a pane's queue holds its other briefs back
// for the message an interrupt announced: one lost on the way must not
// stop the queue for longer.
func (c *Core) interruptHold() time.Duration { return c.cfg.InjectWait + c.cfg.ReceiptWait }

// interruptLocal presses Escape in the local worker e's pane. With next,
// the pane's queue holds back its other briefs for the message to come.
func (c *Core) interruptLocal(ctx context.Context, e Entity, next bool) (*Result, error) {
	in, ok := c.cfg.Injector.(Interrupter)
	if !ok || e.PaneID == "" {
		return nil, userErr("%s is not in a herdr pane this gateway drives (herdr disabled, or a worker that pulls): there is no turn to interrupt; send it a brief instead", e.Addr())
	}
	if next {
		c.queues.hold(e.PaneID, c.cfg.Now().Add(c.interruptHold()))
	}
	ictx, cancel := context.WithTimeout(ctx, c.cfg.InjectWait)
	defer cancel()
	r := in.Interrupt(ictx, e)
	c.log.Info("interrupt", LogGID, e.GID, "pane", e.PaneID, "status", r.Status, LogReason, r.Reason)
	if next && r.Status == StatusFailed {
		c.queues.release(e.PaneID)
	}
	return &Result{Status: r.Status, Reason: r.Reason, Target: e.Addr()}, nil
}
