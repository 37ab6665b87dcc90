package attacktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// raw is one message as it crossed the network: headers and body.
type raw struct {
	h    map[string]any
	body []byte
}

// attack is one run: the deployment, its entities, what the spy captured
// and the watches on each core's log.
type attack struct {
	t              *testing.T
	h              Harness
	d              Deployment
	hostA, hostB   string
	lead, other, w bridge.Entity
	target         string       // lead's address, as w replies to it
	captured       []raw        // N genuine signed replies of w to lead, delivered once
	beat           raw          // one genuine heartbeat of B's gateway
	beatID         string       // its msgId
	watchA, watchB *beatReplays // genuine heartbeats each core refused as replays
}

func newAttack(t *testing.T, h Harness) *attack {
	t.Helper()
	a := &attack{t: t, h: h}
	a.watchA, a.watchB = &beatReplays{}, &beatReplays{}
	a.d = h.Start(t, a.watchA, a.watchB)
	a.hostA, a.hostB = a.d.A.Config().Host, a.d.B.Config().Host
	a.watchA.watch(a.hostA, a.hostB)
	a.watchB.watch(a.hostA, a.hostB)
	a.lead = a.register(a.d.A, "lead", bridge.RolePrimary)
	a.other = a.register(a.d.A, "other", bridge.RolePrimary)
	a.w = a.register(a.d.B, "w", bridge.RoleWorker)
	a.target = "lead@" + a.hostA
	a.eventually("B sees lead, A sees w", func() bool {
		_, e1 := a.d.B.Resolve(a.target)
		_, e2 := a.d.A.Resolve("w@" + a.hostB)
		return e1 == nil && e2 == nil
	})
	return a
}

func (a *attack) register(c *bridge.Core, name string, role bridge.Role) bridge.Entity {
	a.t.Helper()
	e, _, err := c.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role})
	if err != nil {
		a.t.Fatalf("register %s: %v", name, err)
	}
	return e
}

// eventually polls cond until it holds, failing t after the harness's
// Timeout.
func (a *attack) eventually(what string, cond func() bool) {
	a.t.Helper()
	eventually(a.t, a.h.Timeout, what, cond)
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not yet: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// capture has the spy take N real signed replies of w to lead (each
// delivered to lead once, here) and one of B's gateway heartbeats, which A has
// seen or a newer one of by the time the attack replays it.
func (a *attack) capture() {
	a.t.Helper()
	ctx := context.Background()
	spy := a.d.Tap(a.t, ExchangeMsg, a.lead.GID)
	rspy := a.d.Tap(a.t, ExchangeRoster, "roster."+a.hostB)
	for i := range a.h.N {
		if _, err := a.d.B.Send(ctx, a.w.GID, bridge.SendRequest{Target: a.target, Message: fmt.Sprintf("capture-%03d", i)}, nil); err != nil {
			a.t.Fatal(err)
		}
	}
	a.drainCaptured()
	for len(a.captured) < a.h.N {
		a.captured = append(a.captured, a.next("a captured reply", spy))
	}
	// With presence by host, B heartbeats as its gateway (w's delta went
	// out when it registered, before the spy listened): the gateway's
	// heartbeat is the one to replay. Bounded: the spy fails after the
	// harness's Timeout, never waits for ever.
	gw := bridge.GatewayGID(a.hostB)
	a.eventually("a captured heartbeat of B's gateway", func() bool {
		for {
			h, body, ok := rspy()
			if !ok {
				return false
			}
			if h[bridge.HdrFrom] == gw {
				a.beat = raw{h, body}
				return true
			}
		}
	})
	a.beatID, _ = a.beat.h[bridge.HdrMsgID].(string)
	a.watchA.ignore(a.beatID)
	a.watchB.ignore(a.beatID)
	time.Sleep(3 * a.d.A.Config().PresenceEvery) // A has a newer heartbeat of B's gateway by now
}

// drainCaptured polls lead until each captured reply arrived, once.
func (a *attack) drainCaptured() {
	a.t.Helper()
	got := map[string]int{}
	a.eventually("the captured replies delivered to lead", func() bool {
		r, err := a.d.A.Poll(context.Background(), a.lead.GID, bridge.PollRequest{Max: 500, Wait: 100 * time.Millisecond}, nil)
		if err != nil {
			a.t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body]++
		}
		return len(got) >= a.h.N
	})
	for i := range a.h.N {
		if b := fmt.Sprintf("capture-%03d", i); got[b] != 1 {
			a.t.Errorf("%s delivered %d times", b, got[b])
		}
	}
	if len(got) != a.h.N {
		a.t.Errorf("lead got %d distinct messages while capturing, want %d: %v", len(got), a.h.N, got)
	}
}

func (a *attack) next(what string, get func() (map[string]any, []byte, bool)) raw {
	a.t.Helper()
	var m raw
	a.eventually(what, func() bool {
		h, body, ok := get()
		m = raw{h, body}
		return ok
	})
	return m
}
