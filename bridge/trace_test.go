package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/audit"
)

// hopsOf lists "kind:hop" of a timeline, in its order.
func hopsOf(tl []bridge.TraceHop) []string {
	var out []string
	for _, h := range tl {
		out = append(out, string(h.Kind)+":"+string(h.Hop))
	}
	return out
}

// TestTraceOneHost: a brief to a pull worker and the worker's reply share
// the brief's traceId, and the REPLY names the brief as corr. Tracing the
// traceId lists both messages' hops in order; tracing the brief's msgId
// finds the reply too (by corr); an unknown id says where it looked.
func TestTraceOneHost(t *testing.T) {
	a, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	h := newHarness(t, func(c *bridge.Config) { c.Audit = a })
	p := h.reg("lead", bridge.RolePrimary)
	w := h.reg("w1", bridge.RoleWorker)
	brief := h.send(p, bridge.SendRequest{Target: "w1", Message: "brief one"})
	h.heldFor("w1", 1)
	if got := bodies(h.poll(w, bridge.PollRequest{})); len(got) != 1 {
		t.Fatalf("worker poll: %q", got)
	}
	reply := h.send(w, bridge.SendRequest{Target: "lead", Message: "done"})
	h.heldFor("lead", 1)
	polled := h.poll(p, bridge.PollRequest{})
	if len(polled.Messages) != 1 || polled.Messages[0].Corr != brief.MsgID || polled.Messages[0].TraceID != brief.TraceID {
		t.Fatalf("reply: %+v, want corr %s and trace %s", polled.Messages, brief.MsgID, brief.TraceID)
	}
	if reply.TraceID != brief.TraceID {
		t.Fatalf("reply trace %s, brief trace %s", reply.TraceID, brief.TraceID)
	}

	want := "SEND:publish SEND:accept SEND:hold SEND:drain REPLY:publish REPLY:accept REPLY:hold REPLY:drain"
	for _, id := range []string{brief.TraceID, strings.ToUpper(brief.MsgID)} {
		rep, err := h.c.Trace(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		tl := rep.Timeline()
		if got := strings.Join(hopsOf(tl), " "); got != want {
			t.Fatalf("trace %s:\n got %s\nwant %s", id, got, want)
		}
		if len(rep.Hosts) != 1 || rep.Hosts[0].Host != "h1" || !rep.Hosts[0].Scope.Whole || rep.NotFound() != nil {
			t.Fatalf("hosts: %+v", rep.Hosts)
		}
		if rep.Names[p.GID] != "lead@h1" || rep.Names[w.GID] != "w1@h1" {
			t.Errorf("names: %v", rep.Names)
		}
		for i, hop := range tl {
			if (hop.SinceMs == nil) != (i == 0 || i == 4) { // each message's first hop has no predecessor
				t.Errorf("hop %d (%s %s): sinceMs %v", i, hop.Kind, hop.Hop, hop.SinceMs)
			}
		}
	}
	rep, err := h.c.Trace(context.Background(), uuid.NewString(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.NotFound(); err == nil || !strings.Contains(err.Error(), "no hops found") || !strings.Contains(err.Error(), "searched h1 (its whole audit log, audit.log)") {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := h.c.Trace(context.Background(), "not-an-id", 0); err == nil || !strings.Contains(err.Error(), "not a traceId or msgId") {
		t.Fatalf("bad id: %v", err)
	}
}

// TestTimelineAcrossSkewedClocks: hops of two hosts merge in time order;
// an arrival stamped before its publish (the receiver's clock is behind)
// is listed after the publish, marked skewed, with its own time kept.
func TestTimelineAcrossSkewedClocks(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	brief, reply := uuid.NewString(), uuid.NewString()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rep := &bridge.TraceReport{Hosts: []bridge.TraceHost{
		{Host: "a", Hops: []bridge.AuditRecord{
			{At: at(0), Dir: "out", Hop: bridge.HopPublish, Kind: bridge.KindSend, MsgID: brief},
			{At: at(900), Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindReply, MsgID: reply},
		}},
		{Host: "b", Hops: []bridge.AuditRecord{ // b's clock is 500 ms behind
			{At: at(-480), Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindSend, MsgID: brief},
			{At: at(-400), Dir: "in", Hop: bridge.HopInject, Kind: bridge.KindSend, MsgID: brief},
			{At: at(300), Dir: "out", Kind: bridge.KindReply, MsgID: reply, Verdict: "published"}, // an older record: no hop
		}},
	}}
	tl := rep.Timeline()
	got := make([]string, len(tl))
	for i, h := range tl {
		since := "-"
		if h.SinceMs != nil {
			since = fmt.Sprint(*h.SinceMs)
		}
		got[i] = fmt.Sprintf("%s:%s:%s:%v:%s", h.Seen, h.Kind, h.Hop, h.Skewed, since)
	}
	want := "a:SEND:publish:false:- b:SEND:accept:true:-480 b:SEND:inject:true:80 b:REPLY:publish:false:- a:REPLY:accept:false:600"
	if strings.Join(got, " ") != want {
		t.Fatalf("timeline\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if !tl[1].At.Equal(at(-480)) {
		t.Fatalf("a skewed hop keeps its own time: %v", tl[1].At)
	}
}

// TestTraceKindsNotInInboxes: a TRACE_ANSWER (from a gateway, to a gid)
// published into an entity's inbox is refused bad-kind, never held as a
// message.
func TestTraceKindsNotInInboxes(t *testing.T) {
	h := newHarness(t, nil)
	w := h.reg("w1", bridge.RoleWorker)
	env := h.rawEnv(bridge.KindTraceAnswer, bridge.GatewayGID("h1"), w.GID, `{"hops":[]}`)
	env.Corr = uuid.NewString()
	h.publishRaw(w.GID, env)
	eventually(t, "the TRACE_ANSWER refused", func() bool { return h.c.Refused()[bridge.RefuseBadKind] == 1 })
	if v, _ := h.view("w1"); v.Held != 0 {
		t.Fatalf("held %d", v.Held)
	}
}
