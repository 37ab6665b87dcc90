package bridge

import "github.com/google/uuid"

// Missed asks (SPEC §10): an ASK that reaches an entity with no open waiter
// is answered NO_WAITER at once (SPEC §4), and leaves a trace — a
// MISSED_ASK in the entity's own inbox: from the asker, body the question,
// corr the ASK, turnId its turn. It is held, drained, counted and nudged
// like a REPLY. It is informational: the turn is not open (the asker was
// told nobody waited), so answering it is too_late; the entity replies
// with an ordinary bridge_send.
//
// Why an envelope of its own rather than the ASK held unacked: the notice
// must outlive the ask. An ASK expires with its turn (10 minutes by
// default) and a redelivered one past that is refused as expired, while
// the notice is for an entity that was away: it gets the MessageTTL of
// any held message. Published into the inbox before the ASK is acked, it
// is as durable as any message there; its msgId is derived from the ASK's,
// so if a crash lets the ASK come again, the second notice is refused as a
// copy (by the held set or the seen-set), never held twice.
//
// Verification: its from (the asker) may live on another host, which SPEC
// §3 refuses from anyone but the publishing gateway itself — and this
// gateway is that one: it verified the ASK the notice stands for. A
// MISSED_ASK published by any other host is refused (bad-kind).

// missedAskNS derives a MISSED_ASK's msgId from its entity and its ASK.
var missedAskNS = uuid.MustParse("0b5e7d3a-6c21-5f48-a1d9-4e8b2c7f6a13")

// missedAskID is the msgId of the MISSED_ASK that the ASK askMsgID leaves
// in gid's inbox.
func missedAskID(gid, askMsgID string) string {
	return uuid.NewSHA1(missedAskNS, []byte(gid+"/"+askMsgID)).String()
}

// missedAsk answers env, an ASK to st with no waiter, NO_WAITER and leaves
// its MISSED_ASK (mu held). The turn is recorded as missed so that an
// answer to it hears why it is too late.
func (c *Core) missedAsk(st *entState, env *Envelope, rt *recvTurn) arrival {
	note := c.newEnv(KindMissedAsk, env.From, st.GID, env.Body, c.cfg.MessageTTL)
	note.MsgID = missedAskID(st.GID, env.MsgID)
	note.Corr, note.TurnID, note.TraceID = env.MsgID, env.TurnID, env.TraceID
	rt.missed = true
	rt.expiresAt = note.ExpiresAt // remembered as long as the notice can be read
	st.receive(rt)
	c.log.Info("missed ask", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, env.From, LogGID, st.GID, "turnId", env.TurnID)
	// both out before the ASK is acked: a kill between the two hands the
	// ASK back, and its asker hears NO_WAITER (a second one, if the first
	// got out, finds its turn ended and is dropped)
	return arrival{seen: true, first: []outMsg{{env: note},
		c.noticeFor(KindNoWaiter, st.GID, env, "nobody is waiting: "+st.Name+" has no open bridge_send or bridge_poll; it will find your question held as a MISSED_ASK")}}
}

// missedReason is why answering a missed ask from asker is too late.
func missedReason(asker string) string {
	return "nobody was waiting when this ask arrived, so " + asker + " was told no_waiter and its turn is closed: reply with an ordinary bridge_send to " + asker
}

// missedAskFromElsewhere refuses a MISSED_ASK that another host published:
// only a gateway leaves them, in its own inboxes.
func missedAskFromElsewhere(env *Envelope, host string) (reason, detail string) {
	if env.Kind == KindMissedAsk && env.Host != host {
		return RefuseBadKind, "a MISSED_ASK published by " + env.Host + ": only this gateway leaves them in its inboxes"
	}
	return "", ""
}
