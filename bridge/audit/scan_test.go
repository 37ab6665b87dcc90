package audit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge/audit"
)

// traceWindow and maxHops are the core's bounds of a trace
// (bridge.TraceWindow, bridge.TraceMaxHops).
const (
	traceWindow = 64 << 20
	maxHops     = 1000
)

// writeAudit writes records as audit lines to path.
func writeAudit(t *testing.T, path string, recs ...audit.Record) {
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
func filler(t0 time.Time, n int) []audit.Record {
	out := make([]audit.Record, n)
	for i := range out {
		out[i] = audit.Record{At: t0.Add(time.Duration(i) * time.Millisecond), Dir: "in", Hop: "accept", Kind: "SEND",
			MsgID: uuid.NewString(), TraceID: uuid.NewString(), Verdict: "accepted"}
	}
	return out
}

// TestScanWindowAndRotation: a trace reads the newest window of
// audit.log, then of audit.log.1; a hop with no traceId (an expiry) is
// found by its msgId; what lies before the window is not seen, and the
// scope says how far back it looked.
func TestScanWindowAndRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	trace, brief, old := uuid.NewString(), uuid.NewString(), uuid.NewString()
	writeAudit(t, path+".1", audit.Record{At: t0, Dir: "out", Hop: "publish", Kind: "SEND", MsgID: old, TraceID: trace, Verdict: "published"})
	writeAudit(t, path+".1", filler(t0.Add(time.Second), 200)...)
	writeAudit(t, path+".1", audit.Record{At: t0.Add(2 * time.Second), Dir: "out", Hop: "publish", Kind: "SEND", MsgID: brief, TraceID: trace, Verdict: "published"})
	writeAudit(t, path, filler(t0.Add(3*time.Second), 100)...)
	writeAudit(t, path, audit.Record{At: t0.Add(4 * time.Second), Dir: "in", Hop: "expire", Kind: "SEND", MsgID: brief, Verdict: "expired unread"})

	hops, scope, truncated, err := audit.Scan(path, trace, traceWindow, maxHops)
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	if len(hops) != 3 || hops[0].MsgID != old || hops[1].MsgID != brief || hops[2].Hop != "expire" {
		t.Fatalf("whole log: %+v", hops)
	}
	if !scope.Whole || strings.Join(scope.Files, ",") != "audit.log.1,audit.log" || !scope.Since.Equal(t0) {
		t.Fatalf("scope %+v", scope)
	}

	// a window that reaches into audit.log.1 but not back to its start
	fi, _ := os.Stat(path)
	window := fi.Size() + 2000
	hops, scope, _, err = audit.Scan(path, trace, window, maxHops)
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 2 || hops[0].MsgID != brief || scope.Whole || scope.Bytes != window || !scope.Since.After(t0) {
		t.Fatalf("window %d: %d hops %+v, scope %+v", window, len(hops), hops, scope)
	}
	// a window inside audit.log only: the brief's publish is out of reach,
	// its expiry (which carries no traceId) is found by its msgId
	hops, scope, _, err = audit.Scan(path, brief, 1000, maxHops)
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 1 || hops[0].Hop != "expire" || len(scope.Files) != 1 || scope.Whole {
		t.Fatalf("msgId in a small window: %+v %+v", hops, scope)
	}
	if _, _, _, err := audit.Scan(filepath.Join(dir, "none.log"), trace, 1000, maxHops); err == nil {
		t.Fatal("a missing log: no error")
	}
}

// TestScanCutAndBadLines: a window that starts mid-line, a torn last
// line, an overlong line and a non-JSON line are skipped, never an error.
func TestScanCutAndBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	id := uuid.NewString()
	t0 := time.Now().UTC()
	rec := audit.Record{At: t0, Dir: "in", Hop: "accept", Kind: "SEND", MsgID: id, Verdict: "accepted"}
	writeAudit(t, path, rec)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	fmt.Fprintf(f, "not json %s\n{\"msgId\":\"%s\",\"verdict\":\"%s\"}\n", id, id, strings.Repeat("x", 100<<10))
	f.Close()
	writeAudit(t, path, rec)
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	torn, _ := fmt.Fprintf(f, "{\"msgId\":\"%s\",\"at\":\"20", id) // torn: the writer is mid-line
	f.Close()
	hops, _, _, err := audit.Scan(path, id, traceWindow, maxHops)
	if err != nil || len(hops) != 2 {
		t.Fatalf("%d hops, %v", len(hops), err)
	}
	fi, _ := os.Stat(path)
	line, _ := json.Marshal(rec)
	tail := int64(torn+len(line)+1) + 30 // the torn line, the last record whole, and part of the line before
	hops, _, _, err = audit.Scan(path, id, tail, maxHops)
	if err != nil || len(hops) != 1 {
		t.Fatalf("window of %d of %d bytes: %d hops, %v", tail, fi.Size(), len(hops), err)
	}
}

// TestScanBounded: more than maxHops matching records are cut to the
// earliest maxHops, and say so.
func TestScanBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	trace := uuid.NewString()
	recs := filler(time.Now(), maxHops+10)
	for i := range recs {
		recs[i].TraceID = trace
	}
	writeAudit(t, path, recs...)
	hops, _, truncated, err := audit.Scan(path, trace, traceWindow, maxHops)
	if err != nil || !truncated || len(hops) != maxHops || hops[0].MsgID != recs[0].MsgID {
		t.Fatalf("%d hops, truncated %v, %v", len(hops), truncated, err)
	}
}

// BenchmarkScan reads a full window (a trace's bytes of other
// messages' hops, one conversation among them) for one trace.
func BenchmarkScan(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	trace := uuid.NewString()
	t0 := time.Now().UTC()
	var size int64
	lines := 0
	for i := 0; size < traceWindow; i++ {
		r := audit.Record{At: t0.Add(time.Duration(i) * time.Millisecond), Dir: "in", Hop: "accept", Kind: "SEND",
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
		hops, _, _, err := audit.Scan(path, trace, traceWindow, maxHops)
		if err != nil || len(hops) == 0 {
			b.Fatal(len(hops), err)
		}
	}
	b.ReportMetric(float64(size)/float64(lines), "bytes/hop")
}
