package bridge

import "errors"

// Notices — INJECTED, FAILED, NO_WAITER, TOO_LATE, ABANDONED, MISSED_ASK —
// are published mandatory (publishAll), like every message but broadcasts:
// one no inbox takes (its addressee was removed, or never existed on that
// broker) is not lost silently. Nobody awaits a notice about a notice, so
// it is not reported to anyone: it is logged with its ids, counted (its
// publish Event's status starts with StatusNoticeUnroutable:
// herdbridge_notices_unroutable_total) and recorded in the dead-letter log
// (`herdbridge dlq list`, reason "unroutable: …").

// StatusNoticeUnroutable starts the status of the publish Event of a
// notice no inbox took.
const StatusNoticeUnroutable = "notice unroutable"

// ReasonUnroutable starts the dead-letter reason of a notice no inbox took.
const ReasonUnroutable = "unroutable"

// noticeKinds are the kinds publishAll publishes: the notices and
// receipts about another message.
var noticeKinds = map[Kind]bool{KindInjected: true, KindFailed: true, KindNoWaiter: true, KindTooLate: true,
	KindAbandoned: true, KindMissedAsk: true}

// IsNotice reports whether k is a notice or receipt about another message.
// No caller waits on its publish to be told it failed, so a transport that
// cannot publish one now keeps it for later whatever its outage mode
// (bridge/split): failing it would only lose it.
func IsNotice(k Kind) bool { return noticeKinds[k] }

// publishFailedStatus is the status of a failed publish's Event: a notice
// no inbox takes is told apart, so it can be counted.
func publishFailedStatus(env *Envelope, err error) string {
	if noticeKinds[env.Kind] && errors.Is(err, ErrUnroutable) {
		return StatusNoticeUnroutable + ": " + err.Error()
	}
	return "publish failed: " + err.Error()
}

// noticeUnroutable logs and records env, a notice no inbox took.
func (c *Core) noticeUnroutable(env *Envelope, err error) {
	c.log.Warn("notice unroutable: no inbox takes it; recorded in the dead-letter log", LogKind, env.Kind, LogMsgID, env.MsgID,
		LogTraceID, env.TraceID, "corr", env.Corr, LogTo, env.To, "err", err)
	rec := DeadLetterRecord{At: c.cfg.Now(), MsgID: env.MsgID, TraceID: env.TraceID, Kind: string(env.Kind), From: env.From, To: env.To,
		Reason: ReasonUnroutable + ": " + string(env.Kind) + " about " + env.Corr + ": no inbox for " + env.To, Queue: c.inboxQueue(env.To)}
	c.writeDead([]DeadLetterRecord{rec})
}
