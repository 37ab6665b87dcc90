package bridge

import "time"

// Observing: every step a message takes through this gateway is one
// Event. Events go to the audit log (which `herdbridge trace` reads back)
// and to the configured Observer (metrics, the operator page's live feed).
// Events carry metadata only, never a body.

// Hop names one step of a message through a gateway.
type Hop string

const (
	HopPublish    Hop = "publish"    // this gateway published it; At: its ts; Status: published | spooled | failed: …; Latency: until the transport took it (the broker's confirm)
	HopAccept     Hop = "accept"     // it arrived, was verified and admitted; Latency: since its ts (the publish)
	HopRefuse     Hop = "refuse"     // it arrived and was refused; Status: the reason
	HopHold       Hop = "hold"       // held for its entity to drain (no call took it at once)
	HopDrain      Hop = "drain"      // handed to its entity by a call (poll, a send's reply, an ask's answer); Latency: since its ts
	HopQueue      Hop = "queue"      // a brief queued for its worker's pane
	HopInject     Hop = "inject"     // typed into a pane; Status: the rung observed; Latency: the typing
	HopExpire     Hop = "expire"     // expired unread where it was held or queued
	HopDeadLetter Hop = "deadletter" // consumed from the dead-letter queue; Status: the reason
)

// Event is one hop of one message at this gateway.
type Event struct {
	At      time.Time
	Hop     Hop
	Kind    Kind
	MsgID   string
	TraceID string
	Corr    string
	From    string
	To      string
	Host    string        // the sending host
	Key     string        // the routing key or queue it went by, when one is known
	Entity  string        // the local entity it concerns, when one does
	Status  string        // the hop's outcome (see Hop)
	Latency time.Duration // hop-specific, zero when not measured (see Hop)
}

// Observer is told every Event. Observe is called on the core's
// goroutines, some holding an entity's lock: it must not block and must
// not call back into the Core.
type Observer interface {
	Observe(Event)
}

// Observers fans one Event out to several observers.
type Observers []Observer

// Observe tells each observer.
func (os Observers) Observe(e Event) {
	for _, o := range os {
		o.Observe(e)
	}
}

// observe stamps e and hands it to the audit log and the observer.
func (c *Core) observe(e Event) {
	if !c.observed() {
		return
	}
	if e.At.IsZero() {
		e.At = c.cfg.Now()
	}
	if c.cfg.Audit != nil {
		c.cfg.Audit.Write(auditRecord(e))
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.Observe(e)
	}
}

// observeEnv is observe for a hop of env with status, routed by key.
func (c *Core) observeEnv(hop Hop, env *Envelope, key, status string) {
	if !c.observed() {
		return
	}
	e := c.envEvent(hop, env, status)
	e.Key = key
	c.observe(e)
}

// observeFor is observe for a hop of env at local entity gid; latency is
// the hop's own measure where it does not count from env's ts.
func (c *Core) observeFor(hop Hop, gid string, env *Envelope, status string, latency time.Duration) {
	if !c.observed() {
		return
	}
	e := c.envEvent(hop, env, status)
	e.Entity = gid
	if e.Latency == 0 {
		e.Latency = latency
	}
	c.observe(e)
}

// envEvent is the Event of a hop of env: its ids, and for the hops that
// count from env's ts, their time and latency.
func (c *Core) envEvent(hop Hop, env *Envelope, status string) Event {
	e := Event{Hop: hop, Kind: env.Kind, MsgID: env.MsgID, TraceID: env.TraceID, Corr: env.Corr,
		From: env.From, To: env.To, Host: env.Host, Status: status}
	switch {
	case env.TS.IsZero():
	case hop == HopAccept || hop == HopDrain:
		e.At = c.cfg.Now()
		e.Latency = e.At.Sub(env.TS)
	case hop == HopPublish:
		// told once the broker confirmed it: the hop is when it was sent
		// (its ts, which the receivers' latencies count from), its latency
		// the wait for the confirm
		e.At = env.TS
		e.Latency = c.cfg.Now().Sub(env.TS)
	}
	return e
}

// observed reports whether anyone is told of hops: without an audit log
// or an observer, no Event is built.
func (c *Core) observed() bool { return c.cfg.Audit != nil || c.cfg.Observer != nil }

// observeHead is observe for a hop of a held message known by its head.
func (c *Core) observeHead(hop Hop, gid string, h *heldHead, status string) {
	if !c.observed() {
		return
	}
	c.observe(Event{Hop: hop, Kind: h.kind, MsgID: h.msgID(), TraceID: h.traceID(), From: h.from, To: gid, Entity: gid, Status: status})
}
