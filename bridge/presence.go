package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// GatewayName is the presence entry of a host itself (roster.<host>._gateway):
// a host with no agents is still visible, with its spawn profiles.
const GatewayName = "_gateway"

// Presence is what one heartbeat says (the body of a PRESENCE envelope).
// Presence is soft state: entries expire after PresenceTTL without one.
type Presence struct {
	GID      string   `json:"gid,omitempty"`
	Name     string   `json:"name"`
	Host     string   `json:"host"`
	Role     Role     `json:"role,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	PaneID   string   `json:"paneId,omitempty"`
	Status   string   `json:"status,omitempty"`
	Forward  bool     `json:"forward,omitempty"`  // briefs to it are typed into a pane (receipts follow)
	Profiles []string `json:"profiles,omitempty"` // the _gateway entry: the host's spawn profiles
	Gone     bool     `json:"gone,omitempty"`     // removed: drop it now, not at expiry
	Key      string   `json:"key,omitempty"`      // the _gateway entry: its host key's fingerprint
}

type remoteEntry struct {
	p    Presence
	seen time.Time
}

// SetProfiles sets what this host's _gateway presence advertises.
func (c *Core) SetProfiles(f func() []string) {
	c.mu.Lock()
	c.profiles = f
	c.mu.Unlock()
}

// presenceLoop heartbeats every local entity and the host, and follows the
// other hosts' heartbeats, when the transport crosses hosts.
func (c *Core) presenceLoop(pt PresenceTransport) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.PresenceEvery)
	defer t.Stop()
	c.publishPresence(nil)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.publishPresence(nil)
			c.expirePresence()
		case <-c.presenceKick:
			c.publishPresence(nil)
		}
	}
}

// kickPresence asks for a heartbeat now (an entity registered).
func (c *Core) kickPresence() {
	select {
	case c.presenceKick <- struct{}{}:
	default:
	}
}

func (c *Core) presenceOf(st *entState) Presence {
	return Presence{GID: st.GID, Name: st.Name, Host: c.cfg.Host, Role: st.Role, Groups: append([]string(nil), st.Groups...),
		PaneID: st.PaneID, Status: st.paneStatus, Forward: c.forwardsLocked(st)}
}

// publishPresence sends one heartbeat per local entity and the host's own;
// extra adds entries (a removal's Gone).
func (c *Core) publishPresence(extra []Presence) {
	pt, ok := c.tr.(PresenceTransport)
	if !ok {
		return
	}
	c.mu.Lock()
	ps := append([]Presence(nil), extra...)
	for _, st := range c.ents {
		ps = append(ps, c.presenceOf(st))
	}
	gw := Presence{GID: GatewayGID(c.cfg.Host), Name: GatewayName, Host: c.cfg.Host, Profiles: []string{}, Key: c.cfg.KeyFingerprint}
	if c.profiles != nil {
		gw.Profiles = c.profiles()
	}
	ps = append(ps, gw)
	c.mu.Unlock()
	for _, p := range ps {
		body, _ := json.Marshal(p)
		env := c.newEnv(KindPresence, p.GID, "roster."+c.cfg.Host+"."+p.Name, body, c.cfg.PresenceTTL)
		c.sign(env)
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		err := pt.PublishPresence(ctx, env)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("presence heartbeat not published", "name", p.Name, "err", err)
		}
	}
}

// onPresence checks a heartbeat (signed by its host, for an entity of
// that host, routed by roster.<host>, not expired) and records it. A
// refused one is dead-lettered like any message.
func (c *Core) onPresence(d Delivery) {
	reason, detail, _ := c.verify(d, func(env *Envelope) string {
		if env.Kind != KindPresence {
			return "a " + string(env.Kind) + " on the roster exchange"
		}
		if d.Key != "" && d.Key != "roster."+env.Host {
			return "routing key " + d.Key + " is not roster." + env.Host
		}
		return ""
	})
	if reason != "" {
		c.refuse(d, "roster", reason, detail)
		return
	}
	env := d.Env
	ack := func() {
		if err := d.Acker.Ack(); err != nil {
			c.log.Debug("presence ack failed", "err", err)
		}
	}
	if env.Host == c.cfg.Host {
		ack()
		// our own heartbeat came back: the roster link works (see expirePresence)
		now := c.cfg.Now()
		c.mu.Lock()
		if now.Sub(c.presenceHeard) > 2*c.cfg.PresenceEvery {
			// we were deaf (a broker outage): give every entry a fresh TTL
			// to send its next heartbeat before judging it gone
			for _, r := range c.remote {
				r.seen = now
			}
			for _, h := range c.hosts {
				h.seen = now
			}
		}
		c.presenceHeard = now
		c.mu.Unlock()
		return // local entities are known first-hand
	}
	var p Presence
	if err := json.Unmarshal(env.Body, &p); err != nil || p.Name == "" || p.Host != env.Host || p.GID != env.From ||
		(p.Name == GatewayName) != (p.GID == GatewayGID(p.Host)) || p.Name != GatewayName && (!isUUID(p.GID) || !ValidName(p.Name)) {
		c.refuse(d, "roster", RefuseMalformed, fmt.Sprintf("presence body does not match its envelope (%v)", err))
		return
	}
	now := c.cfg.Now()
	c.mu.Lock()
	if on := c.ownerLocked(p.GID, now); p.Name != GatewayName && on != "" && on != p.Host {
		c.mu.Unlock()
		c.refuse(d, "roster", RefuseFromNotOnHost, fmt.Sprintf("presence of %s, which lives on %s, signed by %s", p.GID, on, p.Host))
		return
	}
	if !env.TS.After(c.lastBeat[p.GID]) {
		c.mu.Unlock()
		c.refuse(d, "roster", RefuseReplayed, "a heartbeat no newer than the last one of "+p.GID)
		return
	}
	c.lastBeat[p.GID] = env.TS
	if p.Name == GatewayName {
		c.hosts[p.Host] = &remoteEntry{p: p, seen: now}
		c.mu.Unlock()
		ack()
		return
	}
	c.bindLocked(p.GID, p.Host, now)
	if p.Gone {
		delete(c.remote, p.GID) // its binding stays: its backlog still verifies
		c.mu.Unlock()
		ack()
		return
	}
	c.remote[p.GID] = &remoteEntry{p: p, seen: now}
	if h := c.hosts[p.Host]; h != nil {
		h.seen = now
	}
	waiting := c.releasePendingLocked(p.GID)
	c.mu.Unlock()
	ack()
	for _, w := range waiting { // messages that arrived before this heartbeat
		w.redo(w.d)
	}
}

// expirePresence forgets entries whose heartbeats stopped — but only while
// this gateway hears its own: during a broker outage nothing arrives from
// anyone, and forgetting every remote entity would turn a short blip into
// "unknown target" errors.
func (c *Core) expirePresence() {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.presenceHeard) > 2*c.cfg.PresenceEvery {
		return
	}
	for gid, r := range c.remote {
		if now.Sub(r.seen) > c.cfg.PresenceTTL {
			delete(c.remote, gid)
		}
	}
	for h, r := range c.hosts {
		if now.Sub(r.seen) > c.cfg.PresenceTTL {
			delete(c.hosts, h)
		}
	}
	for gid, ts := range c.lastBeat { // past any heartbeat's lifetime: a replay is refused as expired
		if now.Sub(ts) > c.cfg.PresenceTTL+c.cfg.ClockSkew {
			delete(c.lastBeat, gid)
		}
	}
}

func (r *remoteEntry) entity() Entity {
	return Entity{GID: r.p.GID, Name: r.p.Name, Host: r.p.Host, Role: r.p.Role, Groups: r.p.Groups, PaneID: r.p.PaneID}
}

// remoteLocked finds a remote entity by gid, name@host, or a name that is
// unique across the other hosts. ambiguous lists the candidates.
func (c *Core) remoteLocked(target, name, host string) (e *remoteEntry, ambiguous []string) {
	if r := c.remote[target]; r != nil {
		return r, nil
	}
	var hits []*remoteEntry
	for _, r := range c.remote {
		if r.p.Name == name && (host == "" || r.p.Host == host) {
			hits = append(hits, r)
		}
	}
	if len(hits) == 1 {
		return hits[0], nil
	}
	for _, h := range hits {
		ambiguous = append(ambiguous, h.p.Name+"@"+h.p.Host)
	}
	sort.Strings(ambiguous)
	return nil, ambiguous
}

// forwards reports whether briefs to target go through a pane's forward
// path (and so a receipt will follow).
func (c *Core) forwards(target Entity) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.ents[target.GID]; st != nil {
		return c.forwardsLocked(st)
	}
	if r := c.remote[target.GID]; r != nil {
		return r.p.Forward
	}
	return false
}
