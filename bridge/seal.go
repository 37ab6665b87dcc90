package bridge

import (
	"crypto/hpke"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
)

// What Config.Seal says (issue 23).
const (
	// SealAuto seals every sealable envelope to a host whose HPKE key is
	// known (its signed heartbeat published it), and a broadcast to every
	// host that reads it when all their keys are known, and sends the rest
	// clear: the default, so two hosts that both support it seal with
	// nothing configured, and a peer too old to have a key still gets
	// messages.
	SealAuto = "auto"
	// SealRequire refuses to send a sealable envelope clear: a host with
	// no known key, and a broadcast some reading host could not open, is
	// refused with a tool error.
	SealRequire = "require"
	// SealOff never seals (and still opens what others seal).
	SealOff = "off"
)

// What the roster and doctor say of a peer (HostView.Seal).
const (
	SealStateSealed = "sealed" // its key is known: what goes to it is sealed
	SealStateClear  = "clear"  // its key is known but seal is off here
	SealStateNoKey  = "no key" // no heartbeat of it carried a key: clear (auto) or refused (require)
)

// Sealer is this host's HPKE keys (keys.SealKeys): the current public key,
// published in the _gateway heartbeat, and every private key still kept,
// by id, to open with; and the peers' keys learned from their signed
// heartbeats, remembered across restarts (keys.SealPeersFile), so a
// restarted gateway seals before the peer's next heartbeat.
type Sealer interface {
	CurrentSealKey() (id string, pub []byte)
	Private(id string) (hpke.PrivateKey, bool)
	RememberPeer(host string, pub []byte) error
	RememberedPeers() map[string]SealPeer
}

// SealPeer is a remembered peer key.
type SealPeer struct {
	ID  string
	Pub []byte
}

// ParseSealPublic decodes a serialized HPKE public key (the gateway sets it
// to keys.ParseSealPublic; bridge does not import keys).
type ParseSealPublic func(pub []byte) (hpke.PublicKey, error)

// peerSeal is the HPKE key a host's signed heartbeat published.
type peerSeal struct {
	raw string // as published (base64), to skip parsing an unchanged key
	id  string
	pub hpke.PublicKey
}

// sealBook holds the peers' HPKE keys. It does not expire with presence:
// a peer that went quiet keeps its key, so a message to it is not sent
// clear meanwhile. Only verified heartbeats of trusted hosts reach it, so
// it is bounded by the trust file. Its lock is a leaf.
type sealBook struct {
	once  sync.Once // the remembered keys are loaded
	mu    leafMutex
	peers map[string]*peerSeal
}

func (b *sealBook) get(host string) *peerSeal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peers[host]
}

func (b *sealBook) putIfAbsent(host string, ps *peerSeal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers == nil {
		b.peers = map[string]*peerSeal{}
	}
	if b.peers[host] == nil {
		b.peers[host] = ps
	}
}

func (b *sealBook) put(host string, ps *peerSeal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers == nil {
		b.peers = map[string]*peerSeal{}
	}
	b.peers[host] = ps
}

// learnSealKey takes the HPKE key of a verified _gateway heartbeat.
func (c *Core) learnSealKey(p Presence) {
	if p.SealKey == "" || c.cfg.ParseSealPublic == nil {
		return
	}
	if old := c.seals.get(p.Host); old != nil && old.raw == p.SealKey {
		return
	}
	raw, err := base64.StdEncoding.DecodeString(p.SealKey)
	if err != nil {
		c.log.Warn("heartbeat's HPKE key is not base64: not sealing to it", "host", p.Host)
		return
	}
	pub, err := c.cfg.ParseSealPublic(raw)
	if err != nil {
		c.log.Warn("heartbeat's HPKE key does not parse: not sealing to it", "host", p.Host, "err", err)
		return
	}
	id := p.SealKeyID
	if !sealKeyIDOK(id) {
		c.log.Warn("heartbeat's HPKE key id is not a key id: not sealing to it", "host", p.Host)
		return
	}
	c.loadRememberedSealKeys() // before put: a remembered older key must not overwrite this one
	c.seals.put(p.Host, &peerSeal{raw: p.SealKey, id: id, pub: pub})
	c.log.Info("sealing to host with its published HPKE key", "host", p.Host, "sealKey", id)
	if err := c.cfg.Sealer.RememberPeer(p.Host, raw); err != nil {
		c.log.Warn("peer's HPKE key not remembered: after a restart, sealing to it waits for its heartbeat", "host", p.Host, "err", err)
	}
}

// loadRememberedSealKeys takes, once, the peer keys remembered from
// before this start (keys learned since take precedence).
func (c *Core) loadRememberedSealKeys() {
	c.seals.once.Do(func() {
		if c.cfg.Sealer == nil || c.cfg.ParseSealPublic == nil {
			return
		}
		for host, sp := range c.cfg.Sealer.RememberedPeers() {
			pub, err := c.cfg.ParseSealPublic(sp.Pub)
			if err != nil || !sealKeyIDOK(sp.ID) || host == c.cfg.Host {
				continue
			}
			c.seals.putIfAbsent(host, &peerSeal{raw: base64.StdEncoding.EncodeToString(sp.Pub), id: sp.ID, pub: pub})
		}
	})
}

// ownSealKey is what this gateway's heartbeat publishes: base64 key, id.
func (c *Core) ownSealKey() (string, string) {
	if c.cfg.Sealer == nil {
		return "", ""
	}
	id, pub := c.cfg.Sealer.CurrentSealKey()
	return base64.StdEncoding.EncodeToString(pub), id
}

// sealKeyOf is the key to seal to host with: this host's own current one,
// or the one host's heartbeat published.
func (c *Core) sealKeyOf(host string) (hpke.PublicKey, string, bool) {
	if host == c.cfg.Host && c.cfg.Sealer != nil && c.cfg.ParseSealPublic != nil {
		id, raw := c.cfg.Sealer.CurrentSealKey()
		if own := c.seals.get(host); own != nil && own.id == id {
			return own.pub, id, true
		}
		pub, err := c.cfg.ParseSealPublic(raw)
		if err != nil {
			return nil, "", false
		}
		c.seals.put(host, &peerSeal{id: id, pub: pub})
		return pub, id, true
	}
	c.loadRememberedSealKeys()
	if ps := c.seals.get(host); ps != nil {
		return ps.pub, ps.id, true
	}
	return nil, "", false
}

// recipientHost is the host whose gateway opens env: the host of a
// control queue, else the host its to lives on ("" when unknown).
func (c *Core) recipientHost(env *Envelope) string {
	if h, ok := strings.CutPrefix(env.To, "control."); ok && controlKinds[env.Kind] {
		return h
	}
	if c.reg.get(env.To) != nil {
		return c.cfg.Host
	}
	return c.mem.hostOf(env.To)
}

func (c *Core) sealMode() string {
	if c.cfg.Sealer == nil || c.cfg.Seal == "" {
		if c.cfg.Sealer == nil {
			return SealOff
		}
		return SealAuto
	}
	return c.cfg.Seal
}

// sealAndSign returns what goes on the wire for env: a sealed, signed copy
// when env is sealable and its recipient host's key is known (env itself,
// clear, stays this gateway's own record of it), else env signed. Under
// SealRequire a clear one is an error that says why.
func (c *Core) sealAndSign(env *Envelope) (*Envelope, error) {
	mode := c.sealMode()
	if mode == SealOff || !(env.Kind.Sealable() || env.Kind == KindBroadcast) {
		c.sign(env)
		return env, nil
	}
	if env.Kind == KindBroadcast {
		return c.sealBroadcast(env, mode)
	}
	host := c.recipientHost(env)
	if host == c.cfg.Host && !controlKinds[env.Kind] {
		// between entities of this host the split transport carries it in
		// this host's own store, never through the broker: nothing to hide
		// it from, and a seal would cost ~1 ms of CPU per local message
		c.sign(env)
		return env, nil
	}
	pub, id, ok := c.sealKeyOf(host)
	if !ok {
		if mode == SealRequire {
			return nil, userErr("not sent: seal is \"require\" here and no HPKE key of host %q is known yet (its gateway publishes one in its heartbeat from this version on; see herdbridge doctor)", Clip(host))
		}
		c.sign(env)
		return env, nil
	}
	wire := env.Clone()
	if err := wire.SealBody(pub, id); err != nil {
		return nil, err
	}
	c.sign(wire)
	return wire, nil
}

// sealBroadcast seals a broadcast once to every host that may read it
// (broadcastPlan); when one of them cannot open it, or there are too
// many, it goes clear under auto (logged) and is refused under require.
func (c *Core) sealBroadcast(env *Envelope, mode string) (*Envelope, error) {
	rs, why := c.broadcastPlan()
	var wire *Envelope
	if why == "" {
		wire = env.Clone()
		if err := wire.SealBroadcast(rs); err != nil {
			return nil, err
		}
		if len(wire.Body) > MaxBodyBytes {
			why = fmt.Sprintf("sealed to %d hosts it would be %d bytes, over the %d an envelope may be", len(rs), len(wire.Body), MaxBodyBytes)
		}
	}
	if why == "" {
		c.sign(wire)
		return wire, nil
	}
	if mode == SealRequire {
		return nil, userErr("not sent: seal is \"require\" here and this broadcast cannot be sealed: %s; send it to each recipient instead", why)
	}
	c.log.Warn("broadcast sent clear: it cannot be sealed to every host that reads it (seal auto)", LogMsgID, env.MsgID, LogTo, env.To, "why", why)
	c.sign(env)
	return env, nil
}

// broadcastPlan is whom a broadcast is sealed to: this host (its own
// inboxes get the same publish) and every other host it knows — whose
// _gateway heartbeat or entity it holds, or whose HPKE key it keeps (a
// host that is down still has durable inboxes bound). why says, when it
// cannot be sealed, which host cannot open it (no key known, or a gateway
// older than sealed broadcasts) or that there are more than MaxSealHosts.
// A host this gateway has never heard of since it started and has no key
// of is not in it: it would refuse the broadcast as unsealable.
func (c *Core) broadcastPlan() (rs []SealRecipient, why string) {
	set := map[string]bool{c.cfg.Host: true}
	old := map[string]bool{}
	c.pres.mu.Lock()
	for h, e := range c.pres.hosts {
		set[h] = true
		if !e.p.SealsBroadcasts {
			old[h] = true
		}
	}
	for _, e := range c.pres.remote {
		set[e.p.Host] = true
	}
	c.pres.mu.Unlock()
	c.loadRememberedSealKeys()
	c.seals.mu.Lock()
	for h := range c.seals.peers {
		set[h] = true
	}
	c.seals.mu.Unlock()
	hosts := slices.Sorted(maps.Keys(set))
	if len(hosts) > MaxSealHosts {
		return nil, fmt.Sprintf("it is read on %d hosts, over the %d a broadcast is sealed to", len(hosts), MaxSealHosts)
	}
	var nokey, older []string
	for _, h := range hosts {
		pub, id, ok := c.sealKeyOf(h)
		switch {
		case !ok:
			nokey = append(nokey, h)
		case old[h]:
			older = append(older, h)
		default:
			rs = append(rs, SealRecipient{Host: h, KeyID: id, Pub: pub})
		}
	}
	switch {
	case len(nokey) > 0:
		return nil, fmt.Sprintf("no HPKE key of host %s is known", Clip(strings.Join(nokey, ", ")))
	case len(older) > 0:
		return nil, fmt.Sprintf("the gateway of %s is older than sealed broadcasts", Clip(strings.Join(older, ", ")))
	}
	return rs, ""
}

// BroadcastSeal says whether a broadcast sent now would be sealed: the
// hosts it would be sealed to, or why not (doctor).
func (c *Core) BroadcastSeal() (hosts int, why string) {
	if c.sealMode() == SealOff {
		return 0, "seal is off"
	}
	rs, why := c.broadcastPlan()
	return len(rs), why
}

// openSealed opens a verified delivery's sealed body in place. reason is
// RefuseUnsealable when this host has no key of that id (rotated away
// past its window, or sealed to another host) or the ciphertext does not
// open.
func (c *Core) openSealed(env *Envelope) (reason, detail string) {
	if !env.Sealed() {
		return "", ""
	}
	if c.cfg.Sealer == nil {
		return RefuseUnsealable, "sealed body, and this gateway has no HPKE key"
	}
	if env.Seal == SealMultiScheme {
		if err := env.OpenBroadcast(c.cfg.Host, c.cfg.Sealer.Private); err != nil {
			if errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnseal) {
				return malformedReason(err), err.Error()
			}
			return RefuseUnsealable, err.Error()
		}
		return "", ""
	}
	priv, ok := c.cfg.Sealer.Private(env.SealKey)
	if !ok {
		return RefuseUnsealable, "sealed to HPKE key " + env.SealKey + ", which this host does not hold (rotated away past its window, or another host's)"
	}
	if err := env.OpenBody(priv); err != nil {
		if errors.Is(err, ErrMalformed) {
			return malformedReason(err), err.Error()
		}
		return RefuseUnsealable, err.Error()
	}
	return "", ""
}

// SealView is one host's sealing state, for the roster and doctor.
type SealView struct {
	Host  string `json:"host"`
	State string `json:"state"` // sealed | clear | no key
	KeyID string `json:"keyId,omitempty"`
}

// SealStates says, per known host (this one first, then the others by
// name), whether what goes to it is sealed.
func (c *Core) SealStates(hosts []string) []SealView {
	mode := c.sealMode()
	out := make([]SealView, 0, len(hosts))
	sort.Strings(hosts)
	for _, h := range hosts {
		v := SealView{Host: h, State: SealStateNoKey}
		if _, id, ok := c.sealKeyOf(h); ok {
			v.KeyID, v.State = id, SealStateSealed
			if mode == SealOff {
				v.State = SealStateClear
			}
		}
		out = append(out, v)
	}
	return out
}

// SealMode is the sealing mode in force (auto | require | off).
func (c *Core) SealMode() string { return c.sealMode() }

// flagSeal sets each host's seal state in the roster.
func (c *Core) flagSeal(v *RosterView) {
	if c.cfg.Sealer == nil {
		return
	}
	hosts := make([]string, len(v.Hosts))
	for i, h := range v.Hosts {
		hosts[i] = h.Host
	}
	states := map[string]string{}
	for _, s := range c.SealStates(hosts) {
		states[s.Host] = s.State
	}
	for i := range v.Hosts {
		if !v.Hosts[i].Local { // this host's own traffic never reaches the broker
			v.Hosts[i].Seal = states[v.Hosts[i].Host]
		}
	}
}

// authenticatedRefusal is the FAILED reason a brief's sender hears for a
// refusal that came after its signature verified (expired, or a sealed
// body that does not open here), "" for any other: a forged message must
// not make this gateway write to whoever it names.
func authenticatedRefusal(reason string) string {
	switch reason {
	case RefuseExpired:
		return "expired before delivery"
	case RefuseUnsealable:
		return "its sealed body does not open on the recipient's host (sealed to an HPKE key that host no longer holds: retired past its window)"
	}
	return ""
}
