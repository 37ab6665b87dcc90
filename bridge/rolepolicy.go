package bridge

import "fmt"

// The role policy: who may brief whom (issue 23). A brief is text typed
// into a worker's pane as its next turn: a SEND to a worker (bridge_send,
// bridge_interrupt's message, bridge_spawn's brief) or a BROADCAST (it
// reaches every worker). Primaries and orchestrators brief workers; a
// worker replies (a bridge_send to a primary or orchestrator is a REPLY,
// held for it to drain, never typed), asks, answers the asks it received
// and acts on itself, and briefs other workers only where the gateway's
// RolePolicy allows. Every pair, sender role by what it does:
//
//	sender \ does   brief a worker   broadcast        reply / ask / answer
//	primary         yes              yes              yes
//	orchestrator    yes              yes              yes
//	worker          WorkersMayBrief  WorkersMayBrief  yes
//
// The sending gateway refuses with a tool error; the receiving gateway
// checks again, by the sender's role in its host's signed presence, and
// answers a brief it refuses with a FAILED the sender sees: a gateway
// configured (or modified) to let its workers brief cannot brief the
// workers of a host that does not allow it. A sender whose role that host
// does not know (a binding written by an older gateway, before its next
// heartbeat) counts as a worker.

// RolePolicy is the gateway's rule for who may brief whom.
type RolePolicy struct {
	// WorkersMayBrief lets workers brief other workers and broadcast, on
	// this gateway and into this gateway's workers. Off by default.
	WorkersMayBrief bool
}

// mayBrief reports whether an entity of role from may brief a worker.
func (p RolePolicy) mayBrief(from Role) bool {
	return from == RolePrimary || from == RoleOrchestrator || p.WorkersMayBrief
}

// briefRefused is the tool error for caller, refused a brief or broadcast
// (what: "brief other workers", "broadcast") on this gateway; nil if it
// may.
func (c *Core) briefRefused(caller Entity, what string) error {
	if c.cfg.RolePolicy.mayBrief(caller.Role) {
		return nil
	}
	return userErr("refused: %s is a %s, and workers may not %s on this gateway: reply to your primary (bridge_send to it), "+
		"or ask the operator to set rolePolicy.workersMayBrief in %s's config.json", caller.Addr(), caller.Role, what, c.cfg.Host)
}

// spawnBriefRefused is briefRefused for a bridge_spawn with a brief.
func (c *Core) spawnBriefRefused(caller, brief string) error {
	if brief == "" {
		return nil
	}
	st, err := c.caller(caller)
	if err != nil {
		return err
	}
	return c.briefRefused(st.view(), "brief other workers (a bridge_spawn's brief is one)")
}

// remoteSenderRole is the role of env's sender, an entity of another
// host, in that host's signed presence: the live entry, else the role its
// binding recorded (kept, like the binding, across this gateway's
// restarts and for 24 h after the sender's last heartbeat, so a backlog is
// judged as its sender was); "" when neither names one.
func (c *Core) remoteSenderRole(env *Envelope) Role {
	if r := c.pres.entry(env.From); r != nil && r.p.Host == env.Host && r.p.Role != "" {
		return r.p.Role
	}
	return c.mem.roleOf(env.From, env.Host)
}

// RefuseRolePolicy counts the briefs this gateway refused for its role
// policy (Core.Refused): answered with a FAILED, not dead-lettered.
const RefuseRolePolicy = "role-policy"

// policyRefusal is the receiving side's check, for st (a worker, st.mu
// held) and env, a brief from another host: a FAILED to its sender, and
// the brief acked and remembered, when its sender may not brief here.
func (c *Core) policyRefusal(st *entState, env *Envelope) (arrival, bool) {
	if st.Role != RoleWorker || env.Kind != KindSend && env.Kind != KindBroadcast || env.Host == c.cfg.Host {
		return arrival{}, false
	}
	role := c.remoteSenderRole(env)
	if c.cfg.RolePolicy.mayBrief(role) {
		return arrival{}, false
	}
	who := "its sender is a " + string(role) + " (per its host's signed presence)"
	if role == "" {
		who = "its sender's role is not known here (no signed presence names it)"
	}
	reason := fmt.Sprintf("refused by %s: %s was not delivered to %s, because %s and workers may not brief other workers on %s: "+
		"reply to your primary, or ask the operator of %s to set rolePolicy.workersMayBrief", c.cfg.Host, Excerpt(string(env.Body)), st.Name, who, c.cfg.Host, c.cfg.Host)
	gid := st.GID
	return arrival{first: []outMsg{c.receiptFor(KindFailed, gid, env, reason)}, ack: true, seen: true,
		after: func() { c.countPolicyRefusal(env, gid, role) }}, true
}

// countPolicyRefusal counts, logs and traces one brief refused by the
// role policy (no lock held).
func (c *Core) countPolicyRefusal(env *Envelope, gid string, role Role) {
	c.gate.mu.Lock()
	c.gate.refused[RefuseRolePolicy]++
	c.gate.mu.Unlock()
	c.log.Warn("brief refused by the role policy", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogFrom, env.From, "host", env.Host, LogGID, gid, "role", role)
	c.observe(Event{Hop: HopRefuse, Kind: env.Kind, MsgID: env.MsgID, TraceID: env.TraceID, From: env.From, To: gid, Host: env.Host, Status: RefuseRolePolicy})
}
