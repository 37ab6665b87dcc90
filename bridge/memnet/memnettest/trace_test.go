package memnettest_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/audit"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// withAudit gives a host an audit log of its own, closed when the test
// ends: call it before memnettest.New, so the hosts stop first.
func withAudit(t *testing.T) func(*bridge.Config) {
	a, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return func(c *bridge.Config) { c.Audit = a }
}

// TestTraceAcrossHosts: a brief from A to a pull worker on B, the worker's
// ask back and the primary's answer, and the worker's reply all carry the
// brief's traceId; tracing it on A lists each message's hops from both
// hosts' audit logs, answered over the control plane.
func TestTraceAcrossHosts(t *testing.T) {
	auditA, auditB := withAudit(t), withAudit(t) // opened first: closed after the cluster (cleanups run last-in first-out)
	c := memnettest.New(t)
	a, b := c.Start("a", auditA), c.Start("b", auditB)
	lead := a.Register(t, "lead", bridge.RolePrimary)
	w := b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)

	sent := sendAsync(a, lead.GID, bridge.SendRequest{Target: "w@b", Message: "brief", Wait: memnettest.MaxWait})
	drainUntil(t, b, w.GID, "brief")
	asked := askAsync(b, w.GID, bridge.AskRequest{Question: "which one?"})
	res := sent.wait(t)
	if res.Status != bridge.StatusAsked {
		t.Fatalf("send: %+v", res)
	}
	if r, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Target: "w", Message: "this one", TurnID: res.TurnID}, nil); err != nil || r.Status != bridge.StatusDelivered {
		t.Fatalf("answer: %+v %v", r, err)
	}
	if r := asked.wait(t); r.Status != bridge.StatusAnswered || r.TraceID != res.TraceID {
		t.Fatalf("ask: %+v, want trace %s", r, res.TraceID)
	}
	if r, err := b.Core.Send(ctx, w.GID, bridge.SendRequest{Target: "lead@a", Message: "done"}, nil); err != nil || r.TraceID != res.TraceID {
		t.Fatalf("reply: %+v %v", r, err)
	}
	var got map[string]bool
	memnettest.Eventually(t, "each message's publish and accept traced on its host", func() bool {
		rep, err := a.Core.Trace(ctx, res.TraceID, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]bool{}
		for _, h := range rep.Timeline() {
			got[h.Seen+":"+string(h.Kind)+":"+string(h.Hop)] = true
		}
		for _, k := range []string{"a:SEND:publish", "b:SEND:accept", "b:ASK:publish", "a:ASK:accept", "a:ANSWER:publish", "b:ANSWER:accept", "b:REPLY:publish", "a:REPLY:accept"} {
			if !got[k] {
				return false
			}
		}
		return len(rep.Hosts) == 2 && rep.Hosts[1].Host == "b" && rep.Hosts[1].Error == ""
	})
}
