package bridge

import (
	"context"
	"encoding/json"
	"errors"
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
	// Started (the _gateway entry): when the gateway's core started, in
	// Unix ms. A host seen anew, or with another start, knows nobody yet:
	// the others answer with their heartbeats at once, not a period later.
	Started int64 `json:"started,omitempty"`
	// Trusts (the _gateway entry) is the host's trust file: host → key
	// fingerprints. Absent from a gateway older than it: its trust is then
	// "unknown", never "untrusted".
	Trusts map[string][]string `json:"trusts,omitempty"`
	// DeadLetterNotices (the _gateway entry): the host's gateway takes a
	// DEAD_LETTER on its control queue (deadnotice.go). Absent from an
	// older one, which is told of its dead letters the old way.
	DeadLetterNotices bool `json:"deadLetterNotices,omitempty"`
	// GiveUps (the _gateway entry): the host's gateway decides a GIVE_UP
	// (giveup.go). Absent from an older one: an overdue brief to it is
	// reported FAILED by its sender's gateway alone, as before.
	GiveUps bool `json:"giveUps,omitempty"`
	// SealKey (the _gateway entry) is the host's current HPKE public key
	// (base64) and SealKeyID its id: what others seal its bodies to
	// (seal.go). The heartbeat's signature vouches for it. Absent from an
	// older gateway, which is then sent clear (seal auto) or nothing
	// (seal require).
	SealKey   string `json:"sealKey,omitempty"`
	SealKeyID string `json:"sealKeyId,omitempty"`
	// SealsBroadcasts (the _gateway entry): the host's gateway opens a
	// broadcast sealed to many hosts (SealMultiScheme). Absent from an
	// older one: a broadcast while it is present goes clear (seal auto)
	// or is refused (seal require).
	SealsBroadcasts bool `json:"sealsBroadcasts,omitempty"`
	// Digest (the _gateway entry) sums up the host's entity set and
	// profile list: presence by host (presencesync.go). Absent from a
	// gateway older than it, or one in per-entity mode.
	Digest *PresenceDigest `json:"digest,omitempty"`
	// Epoch and Ver (an entity's entry) make it a delta: the change that
	// took the host's set to version Ver in the epoch Epoch (its gateway's
	// start, Unix ms). Absent from a plain heartbeat; an older gateway
	// ignores them and reads a delta as a heartbeat.
	Epoch int64  `json:"epoch,omitempty"`
	Ver   uint64 `json:"ver,omitempty"`
}

// presence is the view of the other hosts, rebuilt from their signed
// heartbeats (SPEC §7): their entities, their _gateway entries, the newest
// heartbeat per gid (an older one is a replay), and when this gateway last
// heard its own. Its lock is a leaf.
type presence struct {
	kick chan struct{} // a heartbeat is wanted now (an entity registered)
	// pub serializes publishing: a removal's Gone goes out after any
	// heartbeat built before it, never before one that would revive it.
	// It is taken before any entity's lock.
	pub  pubMutex
	sent map[string]int64 // ts (Unix ms) of the last heartbeat published per gid (under pub)
	own  ownSync          // what presence by host published of this host (under pub; presencesync.go)

	mu     leafMutex
	fresh  map[string]bool         // entities whose heartbeat is wanted now (kickPresence)
	full   bool                    // every heartbeat is wanted now
	remote map[string]*remoteEntry // entities of other hosts, by gid
	hosts  map[string]*hostEntry   // other hosts' _gateway entries
	beats  map[string]time.Time    // ts of the newest heartbeat per gid
	heard  time.Time               // when our own heartbeat last came back
	peers  map[string]*peerState   // other hosts' trust and clock, by host (peers.go)
	sync   map[string]*hostSync    // other hosts' epoch, version and gids (presencesync.go)
	// strangers are hosts whose heartbeats come signed by no key this
	// gateway trusts: what they claim is unverified, shown only to say
	// "untrusted" (at most maxStrangers).
	strangers map[string]*stranger
}

// remoteEntry is an entity of another host.
type remoteEntry struct {
	p    remoteEntity
	seen time.Time // for expiry: refreshed after a deafness too (heardSelf)
}

// hostEntry is another host's _gateway entry.
type hostEntry struct {
	p     Presence
	seen  time.Time // for expiry: refreshed after a deafness too (heardSelf)
	heard time.Time // when its last heartbeat arrived
}

func newPresence() *presence {
	return &presence{kick: make(chan struct{}, 1), remote: map[string]*remoteEntry{}, hosts: map[string]*hostEntry{}, beats: map[string]time.Time{},
		peers: map[string]*peerState{}, strangers: map[string]*stranger{}}
}

func (r *remoteEntry) entity() Entity {
	return Entity{GID: r.p.GID, Name: r.p.Name, Host: r.p.Host, Role: r.p.Role, Groups: r.p.Groups, PaneID: r.p.PaneID}
}

// entry is the remote entity gid, nil when not present.
func (p *presence) entry(gid string) *remoteEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remote[gid]
}

// host is the _gateway entry of host, nil when not present.
func (p *presence) host(host string) *hostEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts[host]
}

// knowsHost reports whether host has a _gateway entry or any entity here.
func (p *presence) knowsHost(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hosts[host] != nil {
		return true
	}
	for _, r := range p.remote {
		if r.p.Host == host {
			return true
		}
	}
	return false
}

// name is the remote entity gid as name@host, "" when not present.
func (p *presence) name(gid string) string {
	if r := p.entry(gid); r != nil {
		return r.p.Name + "@" + r.p.Host
	}
	return ""
}

// find finds a remote entity by gid, name@host, or a name that is unique
// across the other hosts. ambiguous lists the candidates.
func (p *presence) find(target, name, host string) (e *remoteEntry, ambiguous []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.remote[target]; r != nil {
		return r, nil
	}
	var hits []*remoteEntry
	for _, r := range p.remote {
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

// names lists the remote entities as name@host.
func (p *presence) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.remote {
		out = append(out, r.p.Name+"@"+r.p.Host)
	}
	return out
}

// views adds the remote entities and hosts to a roster.
func (p *presence) views(v *RosterView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.remote {
		st := r.p.Status
		if st == "" {
			st = "online"
		}
		v.Entities = append(v.Entities, EntityView{Entity: r.entity(), Status: st})
	}
	for _, h := range p.hosts {
		heard := h.heard.UTC()
		v.Hosts = append(v.Hosts, HostView{Host: h.p.Host, Profiles: append([]string{}, h.p.Profiles...), Key: h.p.Key, LastHeartbeat: &heard})
	}
	if len(v.Hosts) > 0 && v.Hosts[0].Local && !p.heard.IsZero() {
		heard := p.heard.UTC()
		v.Hosts[0].LastHeartbeat = &heard
	}
}

// heardSelf records that our own heartbeat came back: the roster link
// works. After a deafness (a broker outage) every entry gets a fresh TTL to
// send its next heartbeat before it is judged gone.
func (p *presence) heardSelf(now time.Time, every time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.heard) > 2*every {
		for _, r := range p.remote {
			r.seen = now
		}
		for _, h := range p.hosts {
			h.seen = now
		}
	}
	p.heard = now
}

// newer records ts as gid's newest heartbeat; false means it is not newer
// than the last one (a replay).
func (p *presence) newer(gid string, ts time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ts.After(p.beats[gid]) {
		return false
	}
	p.beats[intern(gid)] = ts
	return true
}

// record applies a verified heartbeat of another host, and reports a
// gateway entry of a host not known before or that started again.
func (p *presence) record(pr Presence, now time.Time) (fresh bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case pr.Name == GatewayName:
		old := p.hosts[pr.Host]
		fresh = old == nil || old.p.Started != pr.Started
		p.hosts[pr.Host] = &hostEntry{p: pr, seen: now, heard: now}
		p.peer(pr.Host).gateway(pr)
	case pr.Gone:
		p.dropRemote(pr.GID)
	default:
		p.putRemote(&remoteEntry{p: compactEntity(pr), seen: now})
		if h := p.hosts[pr.Host]; h != nil {
			h.seen = now
		}
	}
	return fresh
}

// expire forgets entries whose heartbeats stopped — but only while this
// gateway hears its own: during a broker outage nothing arrives from
// anyone, and forgetting every remote entity would turn a short blip into
// "unknown target" errors.
func (p *presence) expire(now time.Time, every, ttl, skew time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.heard) > 2*every {
		return
	}
	for gid, r := range p.remote {
		if now.Sub(r.seen) > ttl {
			p.dropRemote(gid)
		}
	}
	for h, r := range p.hosts {
		if now.Sub(r.seen) > ttl {
			delete(p.hosts, h)
		}
	}
	for h, hs := range p.sync { // a host gone with all its entities starts again from nothing
		if p.hosts[h] == nil && len(hs.gids) == 0 && now.Sub(hs.asked) > ttl && now.Sub(hs.answer) > ttl {
			delete(p.sync, h)
		}
	}
	p.expirePeers(now, ttl)
	for gid, ts := range p.beats { // past any heartbeat's lifetime: a replay is refused as expired
		if now.Sub(ts) > ttl+skew {
			delete(p.beats, gid)
		}
	}
}

// presenceLoop heartbeats every local entity and the host, and follows the
// other hosts' heartbeats, when the transport crosses hosts.
func (c *Core) presenceLoop(pt PresenceTransport) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.PresenceEvery)
	defer t.Stop()
	c.publishPresence(nil)
	// A heartbeat asked for at once (a host started) goes out at most
	// every tenth of a period (250 ms at most): when many gateways
	// start together, each would otherwise answer every newcomer with a
	// heartbeat to all (G³ deliveries for G starts); later is the one put
	// off (Config.PresenceJoinGap).
	gap := c.cfg.PresenceJoinGap
	last := time.Now()
	var later <-chan time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.publishPresence(nil)
			last = time.Now()
			c.pres.expire(c.cfg.Now(), c.cfg.PresenceEvery, c.cfg.PresenceTTL, c.cfg.ClockSkew)
		case <-later:
			later = nil
			c.publishPresence(nil)
			last = time.Now()
		case <-c.pres.kick:
			full, gids := c.pres.takeKick()
			switch {
			case full && time.Since(last) < gap:
				if !c.cfg.PresencePerEntity {
					c.publishSync(false) // what changed now; the heartbeat shortly
				} else if len(gids) > 0 {
					c.publishFresh(gids) // per entity too (older gateways had no gap: G³ per G starts)
				}
				if later == nil {
					later = time.After(gap - time.Since(last))
				}
			case full:
				c.publishPresence(nil)
				last = time.Now()
			case !c.cfg.PresencePerEntity:
				c.publishSync(false) // the deltas of what changed
			default:
				c.publishFresh(gids)
			}
		}
	}
}

// kickPresence asks for the heartbeats of gids now (they registered), or
// for every heartbeat when none is named.
func (c *Core) kickPresence(gids ...string) {
	c.pres.mu.Lock()
	if len(gids) == 0 {
		c.pres.full = true
	}
	for _, gid := range gids {
		if c.pres.fresh == nil {
			c.pres.fresh = map[string]bool{}
		}
		c.pres.fresh[gid] = true
	}
	c.pres.mu.Unlock()
	select {
	case c.pres.kick <- struct{}{}:
	default:
	}
}

// presenceOf is st's heartbeat; false once st was removed.
func (c *Core) presenceOf(st *entState) (Presence, bool) {
	now := c.cfg.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	status := st.paneStatus
	if c.idle(st, now, c.cfg.StaleAfter) {
		status = StatusStale // the other hosts' rosters show it too
	}
	return Presence{GID: st.GID, Name: st.Name, Host: c.cfg.Host, Role: st.Role, Groups: append([]string(nil), st.Groups...),
		PaneID: st.PaneID, Status: status, Forward: c.forwards(st)}, !st.removed
}

// takeKick returns and clears what kickPresence asked for.
func (p *presence) takeKick() (full bool, gids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for gid := range p.fresh {
		gids = append(gids, gid)
	}
	full, p.full, p.fresh = p.full, false, nil
	return full, gids
}

// publishPresence sends the host's heartbeat: by host (presencesync.go),
// the deltas of what changed and the _gateway entry with its digest (a
// removal's Gone is one of those deltas); per entity (PresencePerEntity),
// one heartbeat per local entity and the host's own, extra adding entries
// (a removal's Gone).
func (c *Core) publishPresence(extra []Presence) {
	if !c.cfg.PresencePerEntity {
		c.publishSync(true)
		return
	}
	c.publishBeats(func() []Presence {
		ps := append([]Presence(nil), extra...)
		for _, st := range c.reg.all() {
			if p, ok := c.presenceOf(st); ok {
				ps = append(ps, p)
			}
		}
		return append(ps, c.gatewayPresence(nil))
	})
}

// publishFresh sends only the heartbeats of entities that just registered:
// a team of n registering at once is announced in n heartbeats, not n²
// (every registration used to resend everyone's, and the last ones'
// messages waited out the receivers' PresenceWait behind them).
func (c *Core) publishFresh(gids []string) {
	c.publishBeats(func() []Presence {
		var ps []Presence
		for _, gid := range gids {
			if st := c.reg.get(gid); st != nil {
				if p, ok := c.presenceOf(st); ok {
					ps = append(ps, p)
				}
			}
		}
		return ps
	})
}

// publishBeats signs and publishes the heartbeats build returns, built and
// sent under pub (a removal's Gone never overtakes a heartbeat built before).
func (c *Core) publishBeats(build func() []Presence) {
	pt, ok := c.tr.(PresenceTransport)
	if !ok {
		return
	}
	c.pres.pub.Lock()
	defer c.pres.pub.Unlock()
	for _, p := range build() {
		body, _ := json.Marshal(p)
		env := c.newEnv(KindPresence, p.GID, "roster."+c.cfg.Host+"."+p.Name, body, c.cfg.PresenceTTL)
		c.pres.strictlyLater(env)
		c.sign(env)
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		err := pt.PublishPresence(ctx, env)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("presence heartbeat not published", "name", p.Name, "err", err)
		}
	}
}

// strictlyLater moves a heartbeat's ts past the last one of its gid (pub
// held): receivers refuse a heartbeat no newer than the last as a replay,
// and two beats of one gid within a millisecond (a kick right after a
// tick) would otherwise carry the same ts.
func (p *presence) strictlyLater(env *Envelope) {
	if p.sent == nil {
		p.sent = map[string]int64{}
	}
	// the wire carries milliseconds: compare those
	if last, ms := p.sent[env.From], env.TS.UnixMilli(); ms <= last {
		shift := time.Duration(last+1-ms) * time.Millisecond
		env.TS, env.ExpiresAt = env.TS.Add(shift), env.ExpiresAt.Add(shift)
	}
	p.sent[env.From] = env.TS.UnixMilli()
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
		c.notePeerRefused(d, reason)
		c.refuse(d, "roster", reason, detail)
		return
	}
	env := d.Env
	if env.Host != c.cfg.Host {
		c.pres.noteBeat(env.Host, env.TS, c.cfg.Now(), true)
	}
	if env.Host == c.cfg.Host {
		c.ackPresence(d)
		c.pres.heardSelf(c.cfg.Now(), c.cfg.PresenceEvery)
		return // local entities are known first-hand
	}
	p, err := presenceBody(env)
	if err != nil {
		c.refuse(d, "roster", RefuseMalformed, err.Error())
		return
	}
	now := c.cfg.Now()
	if on := c.ownerOf(p.GID, now); p.Name != GatewayName && on != "" && on != p.Host {
		c.refuse(d, "roster", RefuseFromNotOnHost, fmt.Sprintf("presence of %s, which lives on %s, signed by %s", p.GID, on, p.Host))
		return
	}
	if !c.pres.newer(p.GID, env.TS) {
		c.refuse(d, "roster", RefuseReplayed, "a heartbeat no newer than the last one of "+p.GID)
		return
	}
	if p.Name != GatewayName {
		c.mem.bind(p.GID, p.Host, p.Role, now) // a Gone keeps its binding: its backlog still verifies (and is judged by its role)
	}
	if p.Name == GatewayName {
		c.learnSealKey(p)
	}
	c.takePresence(p, now)
	c.ackPresence(d)
	if p.Name != GatewayName && !p.Gone {
		c.redoPending(p.GID) // messages that arrived before this heartbeat
	}
}

// takePresence records a verified entry of another host: a delta or a
// digest by host (presencesync.go) when both sides speak it, else a
// heartbeat per entity as before.
func (c *Core) takePresence(p Presence, now time.Time) {
	byHost := !c.cfg.PresencePerEntity
	delta, _ := DeltaFields(p)
	if byHost && delta {
		if _, ask := c.pres.applyDelta(p, now, c.askEvery()); ask {
			c.askSnapshot(p.Host, "a delta out of sequence")
		}
		return
	}
	if c.pres.record(p, now) {
		c.kickPresence() // a host that (re)started knows nobody: tell it who we are now
	}
	if byHost && p.Name == GatewayName && p.Digest != nil {
		if match, ask := c.pres.checkDigest(p, now, c.askEvery()); !match && ask {
			c.askSnapshot(p.Host, "its digest does not match this view")
		}
	}
}

func (c *Core) ackPresence(d Delivery) {
	if err := d.Acker.Ack(); err != nil {
		c.log.Debug("presence ack failed", "err", err)
	}
}

// presenceBody decodes a heartbeat's body and checks it against its
// envelope: the entry must be of the signing host and name the sender.
func presenceBody(env *Envelope) (Presence, error) {
	var p Presence
	err := json.Unmarshal(env.Body, &p)
	if err == nil {
		err = ParseDigest(p.Digest)
	}
	if err == nil {
		_, err = DeltaFields(p)
	}
	if err == nil && p.Digest != nil && p.Name != GatewayName {
		err = errors.New("a digest on an entity")
	}
	if err != nil || p.Name == "" || p.Host != env.Host || p.GID != env.From ||
		(p.Name == GatewayName) != (p.GID == GatewayGID(p.Host)) || p.Name != GatewayName && (!isUUID(p.GID) || !ValidName(p.Name)) {
		return p, fmt.Errorf("presence body does not match its envelope (%v)", err)
	}
	return cleanPresence(p), nil
}

// ownerOf is the host gid lives on as far as this gateway knows: this one
// for its own entities, else the host whose signed heartbeat named it
// first, until that binding lapses; "" when none. A gid belongs to that
// host: another host's heartbeat claiming it is refused.
func (c *Core) ownerOf(gid string, now time.Time) string {
	if c.reg.get(gid) != nil {
		return c.cfg.Host
	}
	return c.mem.liveHostOf(gid, now)
}
