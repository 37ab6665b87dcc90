package attacktest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// runCase sends c's N messages and holds A to exactly N refusals, all for
// c's reason (genuine heartbeats refused meanwhile counted apart).
func (a *attack) runCase(t *testing.T, c attackCase) {
	start, before, genuine := time.Now(), a.d.A.Refused(), a.watchA.count()
	for i := range a.h.N {
		c.send(i)
	}
	var delta map[string]uint64
	eventually(t, a.h.Timeout, c.name+": refused", func() bool {
		delta = diff(a.d.A.Refused(), before)
		if n := a.watchA.count() - genuine; n > 0 {
			if delta[bridge.RefuseReplayed] -= n; delta[bridge.RefuseReplayed] == 0 {
				delete(delta, bridge.RefuseReplayed)
			}
		}
		return delta[c.reason] >= uint64(a.h.N)
	})
	t.Logf("%d sent, refused %v in %v", a.h.N, delta, time.Since(start).Round(time.Millisecond))
	if delta[c.reason] != uint64(a.h.N) || len(delta) != 1 {
		t.Errorf("%s: refusals %v, want exactly %d %s", c.name, delta, a.h.N, c.reason)
	}
}

// forgeDeadLetters publishes captured signed replies (and the same with
// the signature stripped) straight to bridge.dlx, claiming a broker TTL
// expiry: no gateway may answer them with a FAILED to w, whom they name.
func (a *attack) forgeDeadLetters() {
	a.t.Helper()
	for i, m := range a.captured {
		h := clone(m.h)
		h["x-first-death-reason"] = bridge.ReasonExpired
		if i%2 == 1 {
			delete(h, bridge.HdrSig)
		}
		a.d.Publish(a.t, ExchangeDLX, "", h, m.body)
	}
	n := 0
	a.eventually("the forged dead letters consumed", func() bool {
		n = 0
		for _, r := range a.deadLetters() {
			if r.Reason == bridge.ReasonExpired && r.From == a.w.GID {
				n++
				if r.Reported {
					a.t.Fatalf("a forged dead letter was reported to its sender: %+v", r)
				}
			}
		}
		return n >= a.h.N
	})
	if r, _ := a.d.B.Poll(context.Background(), a.w.GID, bridge.PollRequest{Max: 500}, nil); len(r.Messages) != 0 {
		a.t.Errorf("w got %d messages from forged dead letters, e.g. %+v", len(r.Messages), r.Messages[0])
	}
	a.t.Logf("%d forged dead letters: 0 FAILEDs sent", n)
}

func clone(h map[string]any) map[string]any {
	c := make(map[string]any, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

// deadLetters are both gateways' dead-letter logs (whichever consumed
// each).
func (a *attack) deadLetters() []bridge.DeadLetterRecord {
	a.t.Helper()
	var out []bridge.DeadLetterRecord
	for _, c := range []*bridge.Core{a.d.A, a.d.B} {
		dl, err := c.DeadLetters(100000)
		if err != nil {
			a.t.Fatal(err)
		}
		out = append(out, dl...)
	}
	return out
}

// checkB: the forged presence reached B's roster queue too, and B refused
// its copies: N impostors of w signed by evil, N untrusted, nothing else
// but the genuine heartbeats it refused (none: see checkDeliveries).
func (a *attack) checkB(before map[string]uint64) (attack int) {
	a.t.Helper()
	n := uint64(a.h.N)
	a.eventually("B refused the forged presence", func() bool {
		d := diff(a.d.B.Refused(), before)
		return d[bridge.RefuseFromNotOnHost]+d[bridge.RefuseBadSignature] >= 2*n
	})
	want := map[string]uint64{bridge.RefuseFromNotOnHost: n, bridge.RefuseBadSignature: n}
	if g := a.watchB.count(); g > 0 {
		want[bridge.RefuseReplayed] = g
	}
	if d := diff(a.d.B.Refused(), before); !same(d, want) {
		a.t.Errorf("B's refusals: %v, want %v", d, want)
	}
	return 2 * a.h.N
}

func same(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkDeadLetters: every refused message is in a dead-letter log — what
// left lead's and other's inboxes and the roster queues of A and B (a
// shared broker may carry other gateways' dead letters: only these count).
func (a *attack) checkDeadLetters(cases, byB int) {
	a.t.Helper()
	want := a.h.N*cases + byB
	queues := map[string]bool{bridge.InboxQueueName(a.lead.GID): true, bridge.InboxQueueName(a.other.GID): true,
		"roster." + a.hostA: true, "roster." + a.hostB: true}
	dead := 0
	a.eventually("every refused message in the dead-letter logs", func() bool {
		dead = 0
		for _, r := range a.deadLetters() {
			if queues[r.Queue] && strings.HasPrefix(r.Reason, bridge.ReasonRejected) && a.ofTheAttack(r) {
				dead++
			}
		}
		return dead >= want
	})
	if dead != want {
		a.t.Errorf("%d dead-lettered, want %d", dead, want)
	}
}

// ofTheAttack tells a refused heartbeat the attack published from a
// genuine one refused (a heartbeat of a host not trusted there, say).
func (a *attack) ofTheAttack(r bridge.DeadLetterRecord) bool {
	if !strings.HasPrefix(r.Queue, "roster.") {
		return true
	}
	return strings.HasPrefix(r.To, "roster."+a.hostB+".impostor") || r.To == "roster."+a.d.Evil+".w" || r.MsgID == a.beatID
}
