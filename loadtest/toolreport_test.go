package loadtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
)

// TestToolReportCountsFailures: a refused call, a lost copy and a failed
// receiving poll are each an error; the report is not OK, says FAIL and
// lists them; the roster's calls stay out of the traffic's totals; the
// gateway's CPU is the difference of its two readings.
func TestToolReportCountsFailures(t *testing.T) {
	eng := New(Config{})
	l := eng.Ledger
	ok := l.Begin(KindBrief, "p@h", "h", []string{"w@h"})
	l.End(ok, "h", result("confirmed", "m1"), nil)
	l.Delivered(ok.Tag, "w@h", "h")
	lost := l.Begin(KindBrief, "p@h", "h", []string{"w@h"})
	l.End(lost, "h", result("confirmed", "m2"), nil)
	refused := l.Begin(KindReply, "w@h", "h", []string{"p@h"})
	l.End(refused, "h", Result{IsError: true, Text: "unknown target p"}, nil)
	l.ReceiveFailed("w@h", Result{}, errors.New("connection reset"))
	l.Call(KindRoster, time.Now(), Result{}, nil)

	r := buildToolReport(eng, NewSampler(nil, time.Second), runFacts{label: "in-process", ran: 2 * time.Second,
		rosterTook: time.Second, before: gateway.RuntimeStats{CPUSeconds: 1.5}, after: gateway.RuntimeStats{CPUSeconds: 2, RSSBytes: 1 << 20}})
	if r.OK() || r.Totals.Errors != 3 || r.Totals.Lost != 1 || r.Totals.Calls != 3 || r.Totals.Owed != 2 || r.Totals.Delivered != 1 {
		t.Fatalf("totals %+v (ok %v)", r.Totals, r.OK())
	}
	by := map[string]ToolKind{}
	for _, k := range r.Kinds {
		by[k.Kind] = k
	}
	if by["brief"].Errors != 1 || by["reply"].Errors != 1 || by["roster"].Calls != 1 || by["brief"].PerSecond != 1 {
		t.Fatalf("kinds %+v", r.Kinds)
	}
	if r.Gateway.CPUSeconds != 0.5 || r.Gateway.RSSBytes != 1<<20 {
		t.Fatalf("gateway %+v", r.Gateway)
	}
	var out strings.Builder
	r.WriteTable(&out)
	for _, want := range []string{"result: FAIL (3 errors, 1 lost)", "unknown target p", "connection reset", lost.Tag, "include theirs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
}

// A gateway restarted during the run (its CPU time went back) is said so,
// with the new process's CPU, never a negative figure.
func TestToolReportGatewayRestarted(t *testing.T) {
	eng := New(Config{})
	r := buildToolReport(eng, NewSampler(nil, time.Second), runFacts{label: "h@dir", ran: 2 * time.Second,
		before: gateway.RuntimeStats{CPUSeconds: 3}, after: gateway.RuntimeStats{CPUSeconds: 0.4}})
	if !r.Gateway.Restarted || r.Gateway.CPUSeconds != 0.4 {
		t.Fatalf("gateway %+v", r.Gateway)
	}
	var out strings.Builder
	r.WriteTable(&out)
	if !strings.Contains(out.String(), "restarted during the run") || strings.Contains(out.String(), "CPU -") {
		t.Fatalf("table:\n%s", out.String())
	}
}
