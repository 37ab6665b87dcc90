package bridge

import "context"

// Broker-held copies of a notice the transport refused. A notice kept for
// a retry (noticeretry.go) lives in this process's memory: a gateway that
// dies before the retry goes out takes it along, and the FAILED or
// INJECTED its addressee waits for never comes. Where the broker has the
// delay exchange (bridge.delay: native on LavinMQ, a plugin on RabbitMQ),
// the core also hands the broker copies of the notice to route later, on
// a backoff — Config.NoticeDelay, then ten times that — so the retry
// survives the gateway. The in-memory retry is not replaced: a delayed
// message has no mandatory routing and no confirm of where it went (one
// that comes due while the inbox is still full or gone is the broker's to
// drop), so it is a copy beside the retry, never instead of it. Every
// copy is the same envelope: the receiver keeps the first to arrive and
// drops the others by msgId, so the addressee sees the notice once. Off
// (no delay exchange, or a transport without one) nothing here runs.

// noticeDelaySteps is how many broker-held copies a refused notice gets:
// at NoticeDelay and at ten times it (a blockage that outlasts both is
// left to the in-memory retry of a gateway that lives).
const noticeDelaySteps = 2

// delayNotice hands the broker delayed copies of env, a notice whose
// publish failed, if its transport can; what it cannot hand is
// only logged (the in-memory retry still has it, or already said it has
// not).
func (c *Core) delayNotice(env *Envelope) {
	dt, ok := c.tr.(DelayTransport)
	if !ok || !dt.DelayState().On {
		return
	}
	after := c.cfg.NoticeDelay
	for i := 0; i < noticeDelaySteps; i, after = i+1, after*10 {
		if !c.cfg.Now().Add(after).Before(env.ExpiresAt) {
			return // it would come due expired: the receiver drops it
		}
		ctx, cancel := context.WithTimeout(c.ctx, noticeRetryWait)
		err := dt.PublishDelayed(ctx, env.To, env, after)
		cancel()
		if err != nil {
			c.log.Warn("notice not handed to bridge.delay: only this gateway's retry has it", LogKind, env.Kind, LogMsgID, env.MsgID,
				LogTraceID, env.TraceID, LogTo, env.To, "after", after, "err", err)
			return
		}
		c.log.Info("notice handed to bridge.delay: the broker routes a copy again after the delay, even if this gateway dies", LogKind, env.Kind,
			LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogTo, env.To, "after", after)
	}
}
