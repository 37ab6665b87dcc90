package bridge

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Trust in both directions and clock skew, per other host, as this
// gateway sees them in the heartbeats (issue 13): a host publishes the
// hosts it trusts in its signed _gateway heartbeat, so this host can tell
// that a peer will refuse what it sends (and fail such a send at once
// instead of reporting confirmed); every heartbeat's ts against this clock
// is the peer's skew. The state lives in presence, under its leaf lock.

// What TrustsUs says.
const (
	TrustYes     = "yes"
	TrustNo      = "no"
	TrustUnknown = "unknown" // a peer older than the trust list, or none heard yet
)

// The roster's trust flag of a host (HostView.Trust).
const (
	TrustBoth      = "both"      // each trusts the other
	TrustOneWay    = "one-way"   // this host trusts it; it does not trust this host
	TrustUntrusted = "untrusted" // this host does not trust it
)

// maxStrangers caps the untrusted hosts remembered: anyone who may publish
// on the roster exchange could invent host ids.
const maxStrangers = 32

// peerState is what the heartbeats of one other host said.
type peerState struct {
	key         string              // the fingerprint its _gateway heartbeat advertises
	trusts      map[string][]string // its trust list; nil: unknown
	trustsKnown bool                // a _gateway heartbeat with a trust list came
	skew        time.Duration       // its ts minus this clock at arrival (positive: it is ahead)
	skewAt      time.Time           // when skew was measured (this clock)
	beat        time.Time           // its last heartbeat this gateway accepted (this clock)
	refusedTime bool                // the last skew came from a heartbeat refused for its ts
}

// stranger is a host heard only in heartbeats no trusted key signed.
type stranger struct {
	key  string // the fingerprint it claims (unverified)
	seen time.Time
}

// PeerView is one other host's trust and clock (doctor, the roster, the
// operator page).
type PeerView struct {
	Host string `json:"host"`
	// Key is the host key fingerprint it advertises (unverified when
	// WeTrust is false).
	Key      string `json:"key,omitempty"`
	WeTrust  bool   `json:"weTrust"`  // this host's trust file has a key of it
	TrustsUs string `json:"trustsUs"` // yes | no | unknown: its published trust list names this host's key
	Trust    string `json:"trust"`    // both | one-way | untrusted | unknown
	// Why says what is wrong with the trust, and how to fix it; "" when both.
	Why string `json:"why,omitempty"`
	// SkewMs is its clock minus this one, from its last heartbeat
	// (positive: it is ahead); nil when none was measured.
	SkewMs *int64 `json:"skewMs,omitempty"`
	// SkewRefused: that heartbeat was refused for its ts (expired or from
	// the future): the skew is past what the allowance takes.
	SkewRefused bool `json:"skewRefused,omitempty"`
	// LastHeartbeat is when this gateway last accepted one of its
	// heartbeats; nil when none (never heard, untrusted, or all refused).
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
}

func (p *presence) peer(host string) *peerState {
	ps := p.peers[host]
	if ps == nil {
		ps = &peerState{}
		p.peers[host] = ps
	}
	return ps
}

// gateway takes a verified _gateway heartbeat's key and trust list.
func (ps *peerState) gateway(pr Presence) {
	ps.key = pr.Key
	ps.trusts, ps.trustsKnown = pr.Trusts, pr.Trusts != nil
}

// noteBeat records the ts of a signed heartbeat of host: its skew, and,
// when it was accepted, its arrival.
func (p *presence) noteBeat(host string, ts, now time.Time, accepted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.peer(host)
	ps.skew, ps.skewAt, ps.refusedTime = ts.Sub(now), now, !accepted
	if accepted {
		ps.beat = now
	}
}

// noteStranger records a _gateway heartbeat of host that no trusted key
// signed.
func (p *presence) noteStranger(host, key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.strangers[host]; s != nil {
		s.key, s.seen = key, now
		return
	}
	if len(p.strangers) < maxStrangers {
		p.strangers[host] = &stranger{key: key, seen: now}
	}
}

// expirePeers forgets what no heartbeat refreshed within ttl (mu held).
func (p *presence) expirePeers(now time.Time, ttl time.Duration) {
	for h, ps := range p.peers {
		if now.Sub(ps.skewAt) > ttl && now.Sub(ps.beat) > ttl {
			delete(p.peers, h)
		}
	}
	for h, s := range p.strangers {
		if now.Sub(s.seen) > ttl {
			delete(p.strangers, h)
		}
	}
}

// notePeerRefused learns from a refused heartbeat what it can: a signed
// one refused for its ts still measures its host's clock; one signed by a
// key this host does not trust says an untrusted host is out there.
func (c *Core) notePeerRefused(d Delivery, reason string) {
	env := d.Env
	if env == nil || env.Host == c.cfg.Host || env.Kind != KindPresence {
		return
	}
	switch reason {
	case RefuseFuture, RefuseExpired: // verify checked the signature first
		c.pres.noteBeat(env.Host, env.TS, c.cfg.Now(), false)
	case RefuseUnknownHost, RefuseBadSignature:
		var p Presence
		if json.Unmarshal(env.Body, &p) == nil && p.Name == GatewayName && p.Host == env.Host {
			c.pres.noteStranger(env.Host, p.Key, c.cfg.Now())
		}
	}
}

// trustList is this host's trust list for its heartbeat.
func (c *Core) trustList() map[string][]string {
	if c.cfg.Trusted == nil {
		return nil
	}
	return c.cfg.Trusted()
}

// Peers is every other host this gateway trusts or heard: its key, trust
// both ways, clock skew and last heartbeat, by host.
func (c *Core) Peers() []PeerView {
	trusted := c.trustList()
	c.pres.mu.Lock()
	out := make(map[string]PeerView)
	for h, ps := range c.pres.peers {
		out[h] = c.peerView(h, ps, trusted)
	}
	for h, s := range c.pres.strangers {
		if v, ok := out[h]; !ok || v.LastHeartbeat == nil || v.LastHeartbeat.Before(s.seen) {
			out[h] = c.strangerView(h, s, trusted)
		}
	}
	c.pres.mu.Unlock()
	for h := range trusted {
		if _, ok := out[h]; !ok && h != c.cfg.Host {
			out[h] = c.peerView(h, &peerState{}, trusted)
		}
	}
	views := slices.Collect(maps.Values(out))
	sort.Slice(views, func(i, j int) bool { return views[i].Host < views[j].Host })
	return views
}

// peerView judges one peer (pres.mu held; trusted is this host's list).
func (c *Core) peerView(host string, ps *peerState, trusted map[string][]string) PeerView {
	v := PeerView{Host: host, Key: ps.key, WeTrust: trusted == nil || len(trusted[host]) > 0, SkewRefused: ps.refusedTime}
	if !ps.skewAt.IsZero() {
		ms := ps.skew.Milliseconds()
		v.SkewMs = &ms
	}
	if !ps.beat.IsZero() {
		t := ps.beat.UTC()
		v.LastHeartbeat = &t
	}
	v.TrustsUs, v.Why = c.trustsUs(host, ps)
	switch {
	case !v.WeTrust:
		v.Trust = TrustUntrusted
		v.Why = fmt.Sprintf("this host does not trust %s: its heartbeats are refused (unknown-host); run `herdbridge keys show` on %s, then `herdbridge keys trust %s KEY` here", host, host, host)
	case v.TrustsUs == TrustYes:
		v.Trust = TrustBoth
	case v.TrustsUs == TrustNo:
		v.Trust = TrustOneWay
	default:
		v.Trust = TrustUnknown
	}
	return v
}

// strangerView is a host whose heartbeats no key trusted here verifies:
// none at all (unknown-host), or only other keys of it (bad-signature, a
// rotation not yet trusted here).
func (c *Core) strangerView(host string, s *stranger, trusted map[string][]string) PeerView {
	v := PeerView{Host: host, Key: s.key, TrustsUs: TrustUnknown, Trust: TrustUntrusted}
	fix := fmt.Sprintf("run `herdbridge keys show` on %s, then `herdbridge keys trust %s KEY` here", host, host)
	if fps := trusted[host]; len(fps) > 0 {
		v.Why = fmt.Sprintf("this host trusts other keys of %s (%s), not the one it signs with now (%s): its heartbeats are refused (bad-signature); %s",
			host, strings.Join(fps, ", "), s.key, fix)
		return v
	}
	v.Why = fmt.Sprintf("this host does not trust %s: its heartbeats are refused (unknown-host); %s", host, fix)
	return v
}

// trustsUs reads ps's trust list: does it name this host's current key?
func (c *Core) trustsUs(host string, ps *peerState) (string, string) {
	if !ps.trustsKnown {
		if ps.beat.IsZero() {
			return TrustUnknown, ""
		}
		return TrustUnknown, host + " publishes no trust list (a gateway older than the trust list, or it runs without keys)"
	}
	fps := ps.trusts[c.cfg.Host]
	if len(fps) > 0 && (c.cfg.KeyFingerprint == "" || slices.Contains(fps, c.cfg.KeyFingerprint)) {
		return TrustYes, ""
	}
	fix := fmt.Sprintf("; on %s run `herdbridge keys trust %s KEY` with the key `herdbridge keys show` prints here", host, c.cfg.Host)
	if len(fps) == 0 {
		return TrustNo, fmt.Sprintf("%s does not trust this host (%s): it refuses what this host sends as unknown-host%s", host, c.cfg.Host, fix)
	}
	return TrustNo, fmt.Sprintf("%s trusts only other keys of this host (%s), not its current key %s: it refuses what this host sends as bad-signature%s",
		host, strings.Join(fps, ", "), c.cfg.KeyFingerprint, fix)
}

// distrustedBy is why host will refuse what this host sends ("" when it
// trusts this host, or nobody knows): a send there fails at once with it.
func (c *Core) distrustedBy(host string) string {
	if host == "" || host == c.cfg.Host {
		return ""
	}
	c.pres.mu.Lock()
	defer c.pres.mu.Unlock()
	ps := c.pres.peers[host]
	if ps == nil {
		return ""
	}
	if v, why := c.trustsUs(host, ps); v == TrustNo {
		return why
	}
	return ""
}

// distrustedResult is a send's result when target's host does not trust
// this one: failed at once, nothing published.
func (c *Core) distrustedResult(target Entity) *Result {
	why := c.distrustedBy(target.Host)
	if why == "" {
		return nil
	}
	c.log.Warn("send refused: the target's host does not trust this one", "target", target.Addr(), "host", target.Host)
	return &Result{Status: StatusFailed, Target: target.Addr(), Reason: why,
		Next: "send again once " + target.Host + " trusts this host (its next heartbeat shows it; `herdbridge doctor` checks)"}
}

// peerTrust is the trust flag of host among views; "" when not there.
func peerTrust(views []PeerView, host string) string {
	for _, v := range views {
		if v.Host == host {
			return v.Trust
		}
	}
	return ""
}

// peerWhy is what is wrong with host's trust among views.
func peerWhy(views []PeerView, host string) string {
	for _, v := range views {
		if v.Host == host {
			return v.Why
		}
	}
	return ""
}

// HeardSelf is when this gateway's own heartbeat last came back through
// the transport (zero: never, or one host): proof that its login may
// publish on the roster and read its roster queue.
func (c *Core) HeardSelf() time.Time {
	c.pres.mu.Lock()
	defer c.pres.mu.Unlock()
	return c.pres.heard
}
