package bridge

import (
	"context"
	"time"
)

// Injector types briefs into a worker's herdr pane: the forward path of
// SPEC §4. The herdr package implements it. Inject is called once per brief,
// after the brief was acked (at-most-once: a crash loses it visibly, never
// types it twice); it blocks until the brief was typed or failed, bounded by
// ctx, and reports the highest rung it observed. It may be called
// concurrently for different panes and must serialize writes to one pane.
type Injector interface {
	Inject(ctx context.Context, b Brief) InjectReceipt
}

// Brief is one message for the forward path.
type Brief struct {
	To       Entity    // the worker, with its pane id
	Env      *Envelope // SEND or BROADCAST
	FromName string    // the sender's name, for the prompt's header
}

// InjectReceipt is what the forward path observed.
type InjectReceipt struct {
	Status string // StatusInjected | StatusSubmitted | StatusUncertain | StatusFailed
	Reason string
}

// SetInjector enables the forward path for entities with a pane id.
func (c *Core) SetInjector(i Injector) {
	c.mu.Lock()
	c.cfg.Injector = i
	c.mu.Unlock()
}

// forwardsLocked reports whether st's briefs go through the forward path.
func (c *Core) forwardsLocked(st *entState) bool {
	return c.cfg.Injector != nil && st.PaneID != "" && st.Role == RoleWorker
}

// forward runs the forward path for one brief already acked: inject, then
// tell the sender INJECTED (its body the rung observed) or FAILED.
func (c *Core) forward(e Entity, env *Envelope, inj Injector) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.InjectWait)
	defer cancel()
	start := c.cfg.Now()
	c.mu.Lock()
	from := c.nameLocked(env.From)
	c.mu.Unlock()
	r := inj.Inject(ctx, Brief{To: e, Env: env, FromName: from})
	c.log.Info("forward path", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "status", r.Status, LogReason, r.Reason, "ms", time.Since(start).Milliseconds())
	if env.Kind != KindSend {
		return // broadcasts are typed but not receipted
	}
	var out outMsg
	if r.Status == StatusFailed || r.Status == "" {
		out = c.control(KindFailed, e.GID, env.From, env.MsgID, "", env.TraceID, "not injected into "+e.Name+": "+r.Reason)
	} else {
		out = c.control(KindInjected, e.GID, env.From, env.MsgID, "", env.TraceID, r.Status+receiptReason(r.Reason))
	}
	c.send([]outMsg{out})
}

func receiptReason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}
