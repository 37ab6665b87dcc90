package bridge

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
)

// Signer signs what this gateway publishes: its host key.
type Signer interface {
	Sign(msg []byte) []byte
}

// Verifier checks a signature under the keys trusted for host. It returns
// an error wrapping ErrUnknownHost when host has no trusted key.
type Verifier interface {
	Verify(host string, msg, sig []byte) error
}

// ErrUnknownHost is a host no key is trusted for.
var ErrUnknownHost = errors.New("bridge: host not trusted")

// Why a gateway refused a message (SPEC §3, in the order they are checked).
// Each has a counter (Core.Refused) and one log line per message.
const (
	RefuseMalformed     = "malformed"           // headers missing, of the wrong type, or out of range
	RefuseVersion       = "unsupported-version" // v this gateway does not speak
	RefuseOversized     = "oversized"           // body over MaxBodyBytes
	RefuseUnknownHost   = "unknown-host"        // no trusted key for host
	RefuseBadSignature  = "bad-signature"       // no sig, or it does not verify under host's keys
	RefuseFromNotOnHost = "from-not-on-host"    // from is not an entity of host per its signed presence
	RefuseToMismatch    = "to-mismatch"         // to is not the routing key / this inbox
	RefuseExpired       = "expired"             // past expiresAt (beyond the clock-skew allowance)
	RefuseFuture        = "future-ts"           // ts ahead of this clock by more than the allowance
	RefuseReplayed      = "replayed"            // msgId already taken, not a broker redelivery
	RefuseNoEntity      = "no-local-entity"     // the inbox's entity is gone
	RefuseBadKind       = "bad-kind"            // a kind that does not belong on that queue
	RefuseUnsealable    = "unsealable"          // signed, but its sealed body does not open here (seal.go)
)

// gatewayNS derives the gid a gateway uses as from for what it originates
// itself (a dead letter's FAILED, a failed remote spawn): an id that lives on
// its host by construction, with no presence needed.
var gatewayNS = uuid.MustParse("6f3c2a4e-1d0b-5c8e-9a7f-3b2d1e0c4a5f")

// gatewayKinds are what a gateway sends as itself (from its GatewayGID).
var gatewayKinds = map[Kind]bool{KindPresence: true, KindFailed: true, KindTrace: true, KindTraceAnswer: true, KindDeadLetter: true, KindGiveUp: true,
	KindPresenceAsk: true, KindPresenceSnapshot: true}

// GatewayGID is the gid of host's gateway itself.
func GatewayGID(host string) string { return uuid.NewSHA1(gatewayNS, []byte(host)).String() }

// gate is SPEC §3's verification at the receiving gateway: the checks in
// order, the deliveries waiting for their sender's presence, and the
// refusals counted by reason. Its lock is a leaf.
type gate struct {
	mu       leafMutex
	pending  map[string][]pendingMsg // deliveries waiting for their sender's presence, by from
	pendingN map[string]int          // how many wait, by queue
	ids      map[string]bool         // msgIds waiting
	refused  map[string]uint64
}

func newGate() *gate {
	return &gate{pending: map[string][]pendingMsg{}, pendingN: map[string]int{}, ids: map[string]bool{}, refused: map[string]uint64{}}
}

// pendingMsg is a delivery from a sender this gateway has no signed
// presence for yet: it waits (unsettled) for the heartbeat, so a message
// sent right after its sender registered is not lost to a presence race.
type pendingMsg struct {
	d     Delivery
	at    time.Time
	queue string
	redo  func(Delivery)
}

// Refused returns how many messages this gateway refused, by reason.
func (c *Core) Refused() map[string]uint64 {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return maps.Clone(c.gate.refused)
}

// sign sets env's signature, when this gateway signs.
func (c *Core) sign(env *Envelope) {
	if c.cfg.Signer != nil {
		env.Sig = c.cfg.Signer.Sign(env.SigningInput())
	}
}

func malformedReason(err error) string {
	switch {
	case errors.Is(err, ErrUnsupportedVersion):
		return RefuseVersion
	case errors.Is(err, ErrOversized):
		return RefuseOversized
	default:
		return RefuseMalformed
	}
}

// verify applies SPEC §3's checks to d, in order: well-formed and a
// supported v → sig valid under the trusted key of host → from lives on
// host per signed presence → to matches the routing key (toErr) → not
// expired, ts not ahead (both with the clock-skew allowance). The seen-set
// comes last, in the caller. wait means from has no presence yet: keep d
// unsettled and try again when it comes (or refuse at PresenceWait).
func (c *Core) verify(d Delivery, toErr func(*Envelope) string) (reason, detail string, wait bool) {
	if d.Env == nil {
		err := d.Err
		if err == nil {
			err = errors.New("no envelope")
		}
		return malformedReason(err), err.Error(), false
	}
	env := d.Env
	needPresence := false
	if c.cfg.Verifier != nil {
		var reason, detail string
		if reason, detail, needPresence = c.verifySender(env); reason != "" {
			return reason, detail, false
		}
	}
	if msg := toErr(env); msg != "" {
		return RefuseToMismatch, msg, false
	}
	if reason, detail := c.verifyTime(env); reason != "" {
		return reason, detail, false
	}
	if needPresence {
		return RefuseFromNotOnHost, "no signed presence of " + env.From + " on " + env.Host + " yet", true
	}
	if reason, detail := c.openSealed(env); reason != "" { // verified first: the signature is over the sealed form
		return reason, detail, false
	}
	return "", "", false
}

// verifySender checks the signature and that from lives on host. needPresence
// means from has no binding yet: judged once the other checks passed.
func (c *Core) verifySender(env *Envelope) (reason, detail string, needPresence bool) {
	if len(env.Sig) == 0 {
		return RefuseBadSignature, "unsigned", false
	}
	if err := c.cfg.Verifier.Verify(env.Host, env.SigningInput(), env.Sig); err != nil {
		if errors.Is(err, ErrUnknownHost) {
			return RefuseUnknownHost, err.Error(), false
		}
		return RefuseBadSignature, err.Error(), false
	}
	fromGateway := env.From == GatewayGID(env.Host)
	if fromGateway && !gatewayKinds[env.Kind] {
		// a gateway speaks for itself only to report a failure, a dead letter or a trace
		return RefuseFromNotOnHost, "a " + string(env.Kind) + " from the gateway of " + env.Host + " (gateways send only FAILED, DEAD_LETTER, GIVE_UP, TRACE and PRESENCE_ASK/SNAPSHOT)", false
	}
	if env.Kind == KindPresence || env.Host == c.cfg.Host || fromGateway {
		return "", "", false
	}
	switch on := c.mem.hostOf(env.From); on {
	case "":
		return "", "", true
	case env.Host:
		return "", "", false
	default:
		return RefuseFromNotOnHost, fmt.Sprintf("%s lives on %s, not %s", env.From, on, env.Host), false
	}
}

// verifyTime refuses a message from the future or past its expiry, with
// the clock-skew allowance (none for a heartbeat: it is worthless once its
// TTL is over).
func (c *Core) verifyTime(env *Envelope) (reason, detail string) {
	now := c.cfg.Now()
	if env.TS.After(now.Add(c.cfg.ClockSkew)) {
		return RefuseFuture, fmt.Sprintf("ts %s is %v ahead of this clock", env.TS.UTC().Format(time.RFC3339Nano), env.TS.Sub(now).Round(time.Millisecond))
	}
	skew := c.cfg.ClockSkew
	if env.Kind == KindPresence {
		skew = 0
	}
	if !now.Before(env.ExpiresAt.Add(skew)) {
		return RefuseExpired, "expired at " + env.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return "", ""
}

// pendingCap bounds the deliveries of one queue that wait for presence: they
// hold prefetch slots, so a flood of them must not wedge the queue; half the
// window leaves the other half flowing. (It was an eighth of a 1024 window,
// 128: an eighth of today's 128 would refuse the 17th of a team of workers
// that registered and replied at once.)
func (c *Core) pendingCap() int { return max(16, c.cfg.Prefetch/2) }

// waitForPresence keeps d (from a sender with no presence yet) unsettled
// until the sender's heartbeat comes — unless its msgId was taken or is
// already waiting (a replay), or queue has too many waiting already.
func (c *Core) waitForPresence(d Delivery, queue, seenKey string, redo func(Delivery)) {
	replay := c.mem.has(seenKey)
	g := c.gate
	g.mu.Lock()
	switch {
	case replay || g.ids[d.Env.MsgID]:
		g.mu.Unlock()
		c.refuse(d, queue, RefuseReplayed, "msgId already taken or waiting")
		return
	case g.pendingN[queue] >= c.pendingCap():
		g.mu.Unlock()
		c.refuse(d, queue, RefuseFromNotOnHost, fmt.Sprintf("no signed presence of %s on %s, and %d messages already wait for their senders' presence here", d.Env.From, d.Env.Host, c.pendingCap()))
		return
	}
	g.pending[d.Env.From] = append(g.pending[d.Env.From], pendingMsg{d: d, at: c.cfg.Now(), queue: queue, redo: redo})
	g.pendingN[queue]++
	g.ids[d.Env.MsgID] = true
	g.mu.Unlock()
	c.log.Info("sender has no presence yet: waiting for its heartbeat", LogMsgID, d.Env.MsgID, LogTraceID, d.Env.TraceID, LogFrom, d.Env.From, "host", d.Env.Host)
	if c.mem.hostOf(d.Env.From) != "" {
		c.redoPending(d.Env.From) // its heartbeat came while this one was being judged
	}
}

func (g *gate) unpendLocked(p pendingMsg) {
	if g.pendingN[p.queue]--; g.pendingN[p.queue] <= 0 {
		delete(g.pendingN, p.queue)
	}
	delete(g.ids, p.d.Env.MsgID)
}

// release takes the deliveries waiting for gid's presence.
func (g *gate) release(gid string) []pendingMsg {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pending[gid]
	delete(g.pending, gid)
	for _, m := range p {
		g.unpendLocked(m)
	}
	return p
}

// redoPending runs again the deliveries that waited for gid's presence.
func (c *Core) redoPending(gid string) {
	for _, w := range c.gate.release(gid) {
		w.redo(w.d)
	}
}

// late takes what waited longer than wait.
func (g *gate) late(now time.Time, wait time.Duration) []pendingMsg {
	var late []pendingMsg
	g.mu.Lock()
	defer g.mu.Unlock()
	for gid, ps := range g.pending {
		keep := ps[:0]
		for _, p := range ps {
			if now.Sub(p.at) >= wait {
				late = append(late, p)
				g.unpendLocked(p)
			} else {
				keep = append(keep, p)
			}
		}
		// the tail past keep held the late ones: cleared, or the array
		// would keep their deliveries (envelope, body, acker) alive
		clear(ps[len(keep):])
		if len(keep) == 0 {
			delete(g.pending, gid)
		} else {
			g.pending[gid] = keep
		}
	}
	return late
}

// expirePending refuses what waited PresenceWait for a presence that never came.
func (c *Core) expirePending(now time.Time) {
	for _, p := range c.gate.late(now, c.cfg.PresenceWait) {
		c.refuse(p.d, p.queue, RefuseFromNotOnHost, fmt.Sprintf("no signed presence of %s on %s within %v", p.d.Env.From, p.d.Env.Host, c.cfg.PresenceWait))
	}
}

// refuse dead-letters d: one log line with the reason (never the body), a
// counter, an audit record, basicReject(requeue=false). The sender is not
// told: a forged message must not make this gateway write to whoever it
// names (an authenticated but expired SEND is answered by the caller).
func (c *Core) refuse(d Delivery, where, reason, detail string) {
	c.gate.mu.Lock()
	c.gate.refused[reason]++
	c.gate.mu.Unlock()
	id := d.ID
	var kind Kind
	var from, to, host, trace string
	if e := d.Env; e != nil {
		id, kind, from, to, host, trace = e.MsgID, e.Kind, e.From, e.To, e.Host, e.TraceID
	}
	c.log.Warn("message refused", LogReason, reason, LogMsgID, id, LogKind, kind, LogFrom, from, LogTo, to, "host", host,
		"key", d.Key, "queue", where, LogTraceID, trace, "detail", detail)
	c.observe(Event{Hop: HopRefuse, Kind: kind, MsgID: id, TraceID: trace, From: from, To: to, Host: host, Key: d.Key, Status: reason})
	if err := d.Acker.Reject(ReasonRejected + ": " + reason); err != nil {
		c.log.Warn("reject failed", LogMsgID, id, LogTraceID, trace, "err", err)
	}
}
