package attacktest

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// attackCase is one attack: N messages, each to be refused for reason.
type attackCase struct {
	name, reason string
	send         func(i int)
}

// fresh is a reply to lead claiming host and from, not signed.
func (a *attack) fresh(host, from string) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: a.lead.GID,
		Host: host, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("attack: " + uuid.NewString())}
}

// gatewayFailed is what a gateway may send as itself: a FAILED from its
// GatewayGID.
func (a *attack) gatewayFailed(host string) *bridge.Envelope {
	e := a.fresh(host, bridge.GatewayGID(host))
	e.Kind, e.Corr = bridge.KindFailed, uuid.NewString()
	return e
}

func sign(e *bridge.Envelope, k bridge.Signer) map[string]any {
	e.Sig = k.Sign(e.SigningInput())
	return e.Headers()
}

func (a *attack) toLead(h map[string]any, body []byte) {
	a.d.Publish(a.t, ExchangeMsg, a.lead.GID, h, body)
}

// evilSigned publishes e signed by evil's (trusted) key to lead.
func (a *attack) evilSigned(e *bridge.Envelope) { a.toLead(sign(e, a.d.EvilKey), e.Body) }

// cases are the attacks, in order: the captured heartbeat first, while it
// is still within its TTL.
func (a *attack) cases() []attackCase {
	return append(a.senderCases(), a.envelopeCases()...)
}

// senderCases attack who sent it: the signature, the host, from.
func (a *attack) senderCases() []attackCase {
	evil, hostB := a.d.Evil, a.hostB
	return []attackCase{
		{"a captured heartbeat of B's gateway, replayed", bridge.RefuseReplayed, func(int) {
			a.d.Publish(a.t, ExchangeRoster, "roster."+hostB, a.beat.h, a.beat.body)
		}},
		{"unsigned", bridge.RefuseBadSignature, func(int) { e := a.fresh(hostB, a.w.GID); a.toLead(e.Headers(), e.Body) }},
		{"tampered body", bridge.RefuseBadSignature, func(i int) {
			a.toLead(a.captured[i].h, append([]byte("attack: "), a.captured[i].body...))
		}},
		{"tampered signed header", bridge.RefuseBadSignature, func(i int) {
			h := maps.Clone(a.captured[i].h)
			h[bridge.HdrTraceID] = uuid.NewString()
			a.toLead(h, a.captured[i].body)
		}},
		{"signed by an untrusted key, claiming host B", bridge.RefuseBadSignature, func(int) {
			e := a.fresh(hostB, a.w.GID)
			a.toLead(sign(e, a.d.Stranger), e.Body)
		}},
		{"unknown host", bridge.RefuseUnknownHost, func(i int) {
			e := a.fresh(fmt.Sprint("nowhere-", i), uuid.NewString())
			a.toLead(sign(e, a.d.Stranger), e.Body)
		}},
		{"from not on the signing host (evil signs as B's worker)", bridge.RefuseFromNotOnHost, func(int) {
			a.evilSigned(a.fresh(evil, a.w.GID))
		}},
		{"a REPLY as evil's gateway itself (gateways send only FAILED)", bridge.RefuseFromNotOnHost, func(int) {
			a.evilSigned(a.fresh(evil, bridge.GatewayGID(evil)))
		}},
		{"a DEAD_LETTER notice from evil's gateway in an inbox (it belongs on a control queue)", bridge.RefuseBadKind, func(int) {
			e := a.gatewayFailed(evil)
			e.Kind = bridge.KindDeadLetter
			a.evilSigned(e)
		}},
		{"to differs from the routing key (captured, rerouted to another inbox)", bridge.RefuseToMismatch, func(i int) {
			a.d.Publish(a.t, ExchangeMsg, a.other.GID, a.captured[i].h, a.captured[i].body)
		}},
		{"replayed msgId (captured, replayed as is)", bridge.RefuseReplayed, func(i int) {
			a.toLead(a.captured[i].h, a.captured[i].body)
		}},
	}
}

// envelopeCases attack the envelope itself (time, size, form, version)
// and presence.
func (a *attack) envelopeCases() []attackCase {
	evil := a.d.Evil
	return []attackCase{
		{"expired", bridge.RefuseExpired, func(int) {
			e := a.gatewayFailed(evil)
			e.TS, e.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-10*time.Minute)
			a.evilSigned(e)
		}},
		{"ts too far in the future", bridge.RefuseFuture, func(int) {
			e := a.gatewayFailed(evil)
			e.TS, e.ExpiresAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
			a.evilSigned(e)
		}},
		{"oversized body", bridge.RefuseOversized, func(int) {
			e := a.gatewayFailed(evil)
			e.Body = []byte(strings.Repeat("a", bridge.MaxBodyBytes+1))
			a.evilSigned(e)
		}},
		{"malformed or missing headers", bridge.RefuseMalformed, func(i int) {
			e := a.gatewayFailed(evil)
			a.toLead(malformed(sign(e, a.d.EvilKey), i), e.Body)
		}},
		{"unsupported v", bridge.RefuseVersion, func(int) {
			e := a.gatewayFailed(evil)
			e.V = 2
			a.evilSigned(e)
		}},
		{"presence claiming B's worker, signed by evil (trusted)", bridge.RefuseFromNotOnHost, func(int) {
			body := fmt.Sprintf(`{"gid":%q,"name":"w","host":%q,"role":"worker"}`, a.w.GID, evil)
			e := a.presence(evil, a.w.GID, "roster."+evil+".w", body)
			a.d.Publish(a.t, ExchangeRoster, "roster."+evil, sign(e, a.d.EvilKey), e.Body)
		}},
		{"presence for host B signed by an untrusted key", bridge.RefuseBadSignature, func(i int) {
			body := fmt.Sprintf(`{"gid":%q,"name":"impostor%d","host":%q,"role":"worker"}`, uuid.NewString(), i, a.hostB)
			e := a.presence(a.hostB, "", "roster."+a.hostB+".impostor", body)
			a.d.Publish(a.t, ExchangeRoster, "roster."+a.hostB, sign(e, a.d.Stranger), e.Body)
		}},
	}
}

// malformed breaks h one of five ways: none at all, msgId missing, v of
// the wrong type, ts out of range, sig of the wrong type.
func malformed(h map[string]any, i int) map[string]any {
	switch i % 5 {
	case 0:
		return nil
	case 1:
		delete(h, bridge.HdrMsgID)
	case 2:
		h[bridge.HdrV] = "1"
	case 3:
		h[bridge.HdrTS] = int64(-5)
	case 4:
		h[bridge.HdrSig] = int32(7)
	}
	return h
}

func (a *attack) presence(host, from, to, body string) *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: from, To: to,
		Host: host, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
}
