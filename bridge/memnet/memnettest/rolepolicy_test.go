package memnettest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// The role policy (issue 23): who may brief whom, every pair, on one host
// and across hosts.

const policyRefusal = "workers may not brief other workers"

func workersMayBrief(cfg *bridge.Config) { cfg.RolePolicy.WorkersMayBrief = true }

// roleRig is one host's entities of every role, its workers in panes.
type roleRig struct {
	h                *memnettest.Host
	p, o, w1, w2, pw bridge.Entity // primary, orchestrator, pane workers w1 and w2, pull worker pw
}

func newRoleRig(t *testing.T, c *memnettest.Cluster, host string, herdr *panes, tune ...func(*bridge.Config)) roleRig {
	t.Helper()
	tune = append(tune, func(cfg *bridge.Config) { cfg.Injector = herdr })
	h := c.Start(host, tune...)
	r := roleRig{h: h, p: h.Register(t, "p", bridge.RolePrimary), o: h.Register(t, "o", bridge.RoleOrchestrator), pw: h.Register(t, "pw", bridge.RoleWorker)}
	for i, e := range []*bridge.Entity{&r.w1, &r.w2} {
		got, _, err := h.Core.Register(ctx, bridge.RegisterRequest{Name: []string{"w1", "w2"}[i], Role: bridge.RoleWorker, PaneID: host + []string{"%1", "%2"}[i]})
		if err != nil {
			t.Fatal(err)
		}
		*e = got
	}
	herdr.mu.Lock()
	herdr.result[host+"%1"], herdr.result[host+"%2"] = bridge.InjectReceipt{Status: bridge.StatusSubmitted}, bridge.InjectReceipt{Status: bridge.StatusSubmitted}
	herdr.mu.Unlock()
	return r
}

// typedBody reports whether body was typed into a pane on host.
func (p *panes) typedBody(host, body string) bool {
	for _, b := range p.briefs() {
		if string(b.Env.Body) == body && b.To.Host == host {
			return true
		}
	}
	return false
}

// TestRolePolicyLocal: every sender role by every kind of send on one
// gateway, with the default policy and with workersMayBrief.
func TestRolePolicyLocal(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "workersMayBrief"}[allow], func(t *testing.T) {
			herdr := &panes{result: map[string]bridge.InjectReceipt{}}
			c := memnettest.New(t)
			var tune []func(*bridge.Config)
			if allow {
				tune = append(tune, workersMayBrief)
			}
			r := newRoleRig(t, c, "a", herdr, tune...)
			core := r.h.Core
			for _, tc := range []struct {
				name     string
				from, to bridge.Entity
				refused  bool // under the default policy
			}{
				{"primary briefs a pane worker", r.p, r.w1, false},
				{"primary briefs a pull worker", r.p, r.pw, false},
				{"orchestrator briefs a worker", r.o, r.w2, false},
				{"primary writes to the orchestrator", r.p, r.o, false},
				{"orchestrator writes to the primary", r.o, r.p, false},
				{"worker replies to the primary", r.w1, r.p, false},
				{"worker replies to the orchestrator", r.pw, r.o, false},
				{"worker briefs a pane worker", r.w1, r.w2, true},
				{"pull worker briefs a pane worker", r.pw, r.w1, true},
				{"worker briefs a pull worker", r.w2, r.pw, true},
			} {
				body := tc.name + " " + map[bool]string{false: "(default)", true: "(allowed)"}[allow]
				res, err := core.Send(ctx, tc.from.GID, bridge.SendRequest{Target: tc.to.Name, Message: body}, nil)
				if tc.refused && !allow {
					wantUserError(t, tc.name, err, policyRefusal, "reply to your primary", "rolePolicy.workersMayBrief", tc.from.Addr())
					if herdr.typedBody("a", body) {
						t.Errorf("%s: refused, yet typed", tc.name)
					}
					continue
				}
				if err != nil || res.Status == bridge.StatusFailed {
					t.Errorf("%s: %+v %v, want it sent", tc.name, res, err)
				}
			}
			for _, tc := range []struct {
				name    string
				from    bridge.Entity
				refused bool
			}{{"primary", r.p, false}, {"orchestrator", r.o, false}, {"pane worker", r.w1, true}, {"pull worker", r.pw, true}} {
				_, err := core.Broadcast(ctx, tc.from.GID, bridge.BroadcastRequest{Message: "broadcast from the " + tc.name})
				if tc.refused && !allow {
					wantUserError(t, "broadcast from the "+tc.name, err, "workers may not broadcast", "rolePolicy.workersMayBrief")
				} else if err != nil {
					t.Errorf("broadcast from the %s: %v", tc.name, err)
				}
			}
			// a worker's bridge_spawn with a brief is refused before anything starts
			_, err := core.Spawn(ctx, r.w1.GID, bridge.SpawnRequest{Profile: "none", Brief: "do it"})
			if !allow {
				wantUserError(t, "worker spawns with a brief", err, "may not brief other workers", "bridge_spawn")
			} else if err == nil || strings.Contains(err.Error(), policyRefusal) {
				t.Errorf("worker spawns with a brief, allowed: %v, want the no-herdr refusal", err)
			}
		})
	}
}

// TestRolePolicyAcrossHosts: host a lets its workers brief (as a gateway
// configured, or modified, to skip the check would); host b does not. b
// refuses what a's workers brief b's workers with a FAILED the sender
// sees, and types nothing; a primary's brief and a worker's reply still
// go through, and once b allows it, so does a worker's brief.
func TestRolePolicyAcrossHosts(t *testing.T) {
	herdr := &panes{result: map[string]bridge.InjectReceipt{}}
	c := memnettest.New(t)
	a := newRoleRig(t, c, "a", herdr, workersMayBrief)
	b := newRoleRig(t, c, "b", herdr)
	c.Converge(t)

	for _, tc := range []struct {
		name     string
		from, to bridge.Entity
		refused  bool
	}{
		{"remote pane worker briefs a pane worker", a.w1, b.w1, true},
		{"remote pull worker briefs a pane worker", a.pw, b.w2, true},
		{"remote pane worker briefs a pull worker", a.w2, b.pw, true},
		{"remote primary briefs a pane worker", a.p, b.w1, false},
		{"remote orchestrator briefs a pull worker", a.o, b.pw, false},
		{"remote worker replies to a primary", a.w1, b.p, false},
		{"remote worker replies to an orchestrator", a.pw, b.o, false},
	} {
		res, err := a.h.Core.Send(ctx, tc.from.GID, bridge.SendRequest{Target: tc.to.Addr(), Message: tc.name}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !tc.refused {
			if res.Status == bridge.StatusFailed {
				t.Errorf("%s: %s %q, want it through", tc.name, res.Status, res.Reason)
			}
			continue
		}
		if tc.to.PaneID == "" { // a pull worker's sender hears no INJECTED: its FAILED is held for it
			res = policyFailed(t, a.h, tc.from, res.MsgID)
		}
		if res.Status != bridge.StatusFailed || !strings.Contains(res.Reason, "refused by b") || !strings.Contains(res.Reason, policyRefusal) {
			t.Errorf("%s: %s %q, want FAILED refused by b's role policy", tc.name, res.Status, res.Reason)
		}
		if herdr.typedBody("b", tc.name) {
			t.Errorf("%s: refused, yet typed", tc.name)
		}
	}
	if n := b.h.Core.Refused()[bridge.RefuseRolePolicy]; n != 3 {
		t.Errorf("b counted %d role-policy refusals, want 3", n)
	}
	// a broadcast from a's worker reaches b's primary (held, never typed),
	// not b's workers: each refusal is a FAILED held for the sender
	bc, err := a.h.Core.Broadcast(ctx, a.w1.GID, bridge.BroadcastRequest{Message: "broadcast from a worker"})
	if err != nil {
		t.Fatal(err)
	}
	drainUntil(t, b.h, b.p.GID, "broadcast from a worker")
	refusedBy := map[string]bool{}
	memnettest.Eventually(t, "b's three workers refuse the broadcast", func() bool {
		r, err := a.h.Core.Poll(ctx, a.w1.GID, bridge.PollRequest{Wait: 100 * time.Millisecond, Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == bc.MsgID && strings.Contains(m.Body, policyRefusal) {
				refusedBy[m.From] = true
			}
		}
		return len(refusedBy) == 3
	})
	if herdr.typedBody("b", "broadcast from a worker") {
		t.Errorf("a worker's broadcast was typed into a pane on b")
	}

	// b allows it now: a's worker's brief is typed
	c.Restart(b.h, func(cfg *bridge.Config) { cfg.Injector = herdr; cfg.RolePolicy.WorkersMayBrief = true })
	c.Converge(t)
	res, err := a.h.Core.Send(ctx, a.w1.GID, bridge.SendRequest{Target: b.w1.Addr(), Message: "allowed now"}, nil)
	if err != nil || res.Status != bridge.StatusSubmitted {
		t.Fatalf("worker's brief once b allows it: %+v %v", res, err)
	}
}

// policyFailed polls e's inbox on h until the FAILED about msgID comes, and
// returns it as a result.
func policyFailed(t *testing.T, h *memnettest.Host, e bridge.Entity, msgID string) *bridge.Result {
	t.Helper()
	var got *bridge.Result
	memnettest.Eventually(t, "the FAILED about "+msgID, func() bool {
		r, err := h.Core.Poll(ctx, e.GID, bridge.PollRequest{Wait: 100 * time.Millisecond, Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == msgID {
				got = &bridge.Result{Status: bridge.StatusFailed, Reason: m.Body}
			}
		}
		return got != nil
	})
	return got
}
