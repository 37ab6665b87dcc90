package bridge

// Provenance: what a model is told about who wrote a message, from what
// this gateway knows rather than from anything the message says. A body
// is data whatever it claims ("from boss", a fake header): the model
// decides how far to trust it from Provenance, which no sender writes.

// How a message's sender was checked (Provenance.Checked).
const (
	// CheckedLocal: the sender is an entity of this gateway, which knows
	// it by its session; nothing crossed a network.
	CheckedLocal = "local"
	// CheckedSignature: another host's gateway published it and its
	// signature verified under that host's trusted key, with from one of
	// that host's entities per its signed presence (SPEC §3).
	CheckedSignature = "signature"
	// CheckedUnsigned: another host's message on a gateway that checks no
	// signatures (no keys configured): from is only what it claims.
	CheckedUnsigned = "unchecked"
)

// Who wrote a message's body (Provenance.By).
const (
	// ByAgent: the sender's MCP session wrote the body (a brief, reply,
	// ask, answer or broadcast; a MISSED_ASK carries its asker's question).
	// Every entity reaches the fabric through an MCP session.
	ByAgent = "agent"
	// ByGateway: the gateway of Provenance.Host wrote the body, a notice
	// about a message (FAILED, ABANDONED, INJECTED, NO_WAITER, TOO_LATE);
	// it may quote text an agent gave, such as the reason a stop was given.
	ByGateway = "gateway"
)

// Provenance is who a message is from, as this gateway verified it.
type Provenance struct {
	// From is the sender as name@host; gid@host when the name is no longer
	// known (the entity was removed), gateway@host for a gateway's own
	// notice.
	From string `json:"from"`
	// Role is the sender's role as its gateway registered it ("" when it
	// is gone, or for a gateway).
	Role    Role   `json:"role,omitempty"`
	Checked string `json:"checked"` // CheckedLocal, CheckedSignature or CheckedUnsigned
	By      string `json:"by"`      // ByAgent or ByGateway
}

// agentKinds are the kinds whose body an entity's session wrote.
var agentKinds = map[Kind]bool{KindSend: true, KindReply: true, KindAsk: true, KindAnswer: true, KindBroadcast: true, KindMissedAsk: true}

// provenance is what this gateway knows of who sent env. Call it with no
// entity lock held: a local sender's role is read under its own lock (a
// re-registration may change it).
func (c *Core) provenance(env *Envelope) Provenance {
	p := Provenance{Checked: CheckedLocal, By: ByGateway}
	switch {
	case env.Host != c.cfg.Host && c.cfg.Verifier != nil:
		p.Checked = CheckedSignature
	case env.Host != c.cfg.Host:
		p.Checked = CheckedUnsigned
	}
	if agentKinds[env.Kind] {
		p.By = ByAgent
	}
	p.From, p.Role = c.senderOf(env)
	return p
}

// senderOf is env's sender as name@host, and its role when known.
func (c *Core) senderOf(env *Envelope) (string, Role) {
	if env.From == GatewayGID(env.Host) {
		return "gateway@" + env.Host, ""
	}
	if env.Host == c.cfg.Host {
		if st := c.reg.get(env.From); st != nil {
			e := st.view()
			return e.Addr(), e.Role
		}
		if d, ok := c.gone.get(env.From); ok {
			return d.addr, ""
		}
	} else if r := c.pres.entry(env.From); r != nil && r.p.Host == env.Host {
		return r.p.Name + "@" + r.p.Host, r.p.Role
	}
	return env.From + "@" + env.Host, ""
}

// noticeReason is the reason, in herdbridge's own words, of a call that
// a notice of kind k ended. The notice's body is another gateway's (or
// this one's) sentence that may quote what a sender wrote — a stop's
// reason, the start of a brief — so it is never spliced into the reason:
// the result carries the notice itself in messages, where it is quoted as
// data with its provenance.
func noticeReason(k Kind) string {
	switch k {
	case KindFailed:
		return "the message was not delivered: the FAILED notice in messages says why"
	case KindAbandoned:
		return "the other side went away: the ABANDONED notice in messages says why"
	case KindTooLate:
		return "the turn no longer takes an answer: the TOO_LATE notice in messages says why"
	case KindNoWaiter:
		return "nobody was waiting: the NO_WAITER notice in messages says why"
	}
	return "a " + string(k) + " notice ended the call: it is in messages"
}

// endedBy records in res the notice r that ended its call: the status, a
// reason of our own, and r in messages (after what res already carries).
func (c *Core) endedBy(res *Result, status string, r *Envelope) {
	res.Status, res.Reason = status, noticeReason(r.Kind)
	res.Messages = append(res.Messages, c.message(r))
}
