package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
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
	audit := filepath.Join(t.TempDir(), "audit.log")
	a, err := bridge.OpenAuditLog(audit, nil)
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

// writeAudit writes records as audit lines to path.
func writeAudit(t *testing.T, path string, recs ...bridge.AuditRecord) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if _, err := f.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// filler is n records of other messages, at times from t0 on.
func filler(t0 time.Time, n int) []bridge.AuditRecord {
	out := make([]bridge.AuditRecord, n)
	for i := range out {
		out[i] = bridge.AuditRecord{At: t0.Add(time.Duration(i) * time.Millisecond), Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindSend,
			MsgID: uuid.NewString(), TraceID: uuid.NewString(), Verdict: "accepted"}
	}
	return out
}

// TestScanAuditWindowAndRotation: a trace reads the newest window of
// audit.log, then of audit.log.1; a hop with no traceId (an expiry) is
// found by its msgId; what lies before the window is not seen, and the
// scope says how far back it looked.
func TestScanAuditWindowAndRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	trace, brief, old := uuid.NewString(), uuid.NewString(), uuid.NewString()
	writeAudit(t, path+".1", bridge.AuditRecord{At: t0, Dir: "out", Hop: bridge.HopPublish, Kind: bridge.KindSend, MsgID: old, TraceID: trace, Verdict: "published"})
	writeAudit(t, path+".1", filler(t0.Add(time.Second), 200)...)
	writeAudit(t, path+".1", bridge.AuditRecord{At: t0.Add(2 * time.Second), Dir: "out", Hop: bridge.HopPublish, Kind: bridge.KindSend, MsgID: brief, TraceID: trace, Verdict: "published"})
	writeAudit(t, path, filler(t0.Add(3*time.Second), 100)...)
	writeAudit(t, path, bridge.AuditRecord{At: t0.Add(4 * time.Second), Dir: "in", Hop: bridge.HopExpire, Kind: bridge.KindSend, MsgID: brief, Verdict: "expired unread"})

	hops, scope, truncated, err := bridge.ScanAudit(path, trace, bridge.TraceWindow)
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	if len(hops) != 3 || hops[0].MsgID != old || hops[1].MsgID != brief || hops[2].Hop != bridge.HopExpire {
		t.Fatalf("whole log: %+v", hops)
	}
	if !scope.Whole || strings.Join(scope.Files, ",") != "audit.log.1,audit.log" || !scope.Since.Equal(t0) {
		t.Fatalf("scope %+v", scope)
	}

	// a window that reaches into audit.log.1 but not back to its start
	fi, _ := os.Stat(path)
	window := fi.Size() + 2000
	hops, scope, _, err = bridge.ScanAudit(path, trace, window)
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 2 || hops[0].MsgID != brief || scope.Whole || scope.Bytes != window || !scope.Since.After(t0) {
		t.Fatalf("window %d: %d hops %+v, scope %+v", window, len(hops), hops, scope)
	}
	// a window inside audit.log only: the brief's publish is out of reach,
	// its expiry (which carries no traceId) is found by its msgId
	hops, scope, _, err = bridge.ScanAudit(path, brief, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 1 || hops[0].Hop != bridge.HopExpire || len(scope.Files) != 1 || scope.Whole {
		t.Fatalf("msgId in a small window: %+v %+v", hops, scope)
	}
	if _, _, _, err := bridge.ScanAudit(filepath.Join(dir, "none.log"), trace, 1000); err == nil {
		t.Fatal("a missing log: no error")
	}
}

// TestScanAuditCutAndBadLines: a window that starts mid-line, a torn last
// line, an overlong line and a non-JSON line are skipped, never an error.
func TestScanAuditCutAndBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	id := uuid.NewString()
	t0 := time.Now().UTC()
	rec := bridge.AuditRecord{At: t0, Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindSend, MsgID: id, Verdict: "accepted"}
	writeAudit(t, path, rec)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	fmt.Fprintf(f, "not json %s\n{\"msgId\":\"%s\",\"verdict\":\"%s\"}\n", id, id, strings.Repeat("x", 100<<10))
	f.Close()
	writeAudit(t, path, rec)
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	torn, _ := fmt.Fprintf(f, "{\"msgId\":\"%s\",\"at\":\"20", id) // torn: the writer is mid-line
	f.Close()
	hops, _, _, err := bridge.ScanAudit(path, id, bridge.TraceWindow)
	if err != nil || len(hops) != 2 {
		t.Fatalf("%d hops, %v", len(hops), err)
	}
	fi, _ := os.Stat(path)
	line, _ := json.Marshal(rec)
	tail := int64(torn+len(line)+1) + 30 // the torn line, the last record whole, and part of the line before
	hops, _, _, err = bridge.ScanAudit(path, id, tail)
	if err != nil || len(hops) != 1 {
		t.Fatalf("window of %d of %d bytes: %d hops, %v", tail, fi.Size(), len(hops), err)
	}
}

// TestScanAuditBounded: more than TraceMaxHops matching hops are cut to
// the earliest TraceMaxHops, and say so.
func TestScanAuditBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	trace := uuid.NewString()
	recs := filler(time.Now(), bridge.TraceMaxHops+10)
	for i := range recs {
		recs[i].TraceID = trace
	}
	writeAudit(t, path, recs...)
	hops, _, truncated, err := bridge.ScanAudit(path, trace, bridge.TraceWindow)
	if err != nil || !truncated || len(hops) != bridge.TraceMaxHops || hops[0].MsgID != recs[0].MsgID {
		t.Fatalf("%d hops, truncated %v, %v", len(hops), truncated, err)
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

// BenchmarkScanAudit reads a full window (TraceWindow bytes of other
// messages' hops, one conversation among them) for one trace.
func BenchmarkScanAudit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	trace := uuid.NewString()
	t0 := time.Now().UTC()
	var size int64
	lines := 0
	for i := 0; size < bridge.TraceWindow; i++ {
		r := bridge.AuditRecord{At: t0.Add(time.Duration(i) * time.Millisecond), Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindSend,
			MsgID: uuid.NewString(), TraceID: uuid.NewString(), From: uuid.NewString(), To: uuid.NewString(), Host: "build-host",
			Key: uuid.NewString(), Verdict: "accepted", LatencyMs: 12.345}
		if i%10000 == 0 {
			r.TraceID = trace
		}
		raw, _ := json.Marshal(r)
		n, _ := f.Write(append(raw, '\n'))
		size += int64(n)
		lines++
	}
	f.Close()
	b.ResetTimer()
	for range b.N {
		hops, _, _, err := bridge.ScanAudit(path, trace, bridge.TraceWindow)
		if err != nil || len(hops) == 0 {
			b.Fatal(len(hops), err)
		}
	}
	b.ReportMetric(float64(size)/float64(lines), "bytes/hop")
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
