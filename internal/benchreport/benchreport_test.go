package benchreport

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func recorded(t *testing.T) *Results {
	t.Helper()
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParseBench(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func recordedLoad(t *testing.T) *Load {
	t.Helper()
	f, err := os.Open("testdata/load.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := ParseLoad(f)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func rowByID(t *testing.T, rows []Row, id string) Row {
	t.Helper()
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no row %q", id)
	return Row{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestParseBench: medians over -count runs (odd and even), the
// GOMAXPROCS suffix dropped from names with dashes of their own, custom
// metrics, and why a benchmark has no result (SKIP, FAIL with its reason).
func TestParseBench(t *testing.T) {
	res := recorded(t)
	if res.CPU != "AMD EPYC 7B13" {
		t.Errorf("cpu %q", res.CPU)
	}
	for _, c := range []struct {
		name, unit string
		want       float64
		runs       int
	}{
		{"BenchmarkRoundTrip/stdio/bridge", "ns/op", 1660000, 3},
		{"BenchmarkRoundTrip/stdio/bridge-nosync", "ns/op", 870000, 3},
		{"BenchmarkRoundTrip/http/roster", "ns/op", 1350000, 2}, // even count: mean of the middle two
		{"BenchmarkForwardPath/20-workers", "overhead-p50-ms", 58, 3},
		{"BenchmarkForwardPath/1-workers", "herdrSubmitDelay-ms", 300, 3},
		{"BenchmarkThroughputOneHost/http", "roster-calls/s", 1567, 3},
		{"BenchmarkGatewayRSS10kHeld", "held10k-RSS-MiB", 21.5, 3}, // one of the three cut in two by a gateway process's stderr
		{"BenchmarkRoundTrip/http/bridge", "B/op", 90000, 2},
	} {
		got, n, ok := res.Median(c.name, c.unit)
		if !ok || !near(got, c.want) || n != c.runs {
			t.Errorf("%s %s: %v (%d runs, %v), want %v (%d)", c.name, c.unit, got, n, ok, c.want, c.runs)
		}
	}
	if _, _, ok := res.Median("BenchmarkLogLine", "ns/op"); ok {
		t.Error("a log line starting with Benchmark was taken for a result")
	}
	for _, c := range []struct{ name, unit, want string }{
		{"BenchmarkBrokerLatency/gateway", "p50-µs", "BenchmarkBrokerLatency skipped: no broker: set RMQ_URL"},
		{"BenchmarkColdStart/mcp-autostart", "ns/op", "BenchmarkColdStart/mcp-autostart failed: gateway.json: no gateway started"},
		{"BenchmarkRoundTrip/stdio/bridge", "msgs/s", "BenchmarkRoundTrip/stdio/bridge ran without reporting msgs/s"},
		{"BenchmarkNope", "ns/op", "BenchmarkNope is not in this run's output"},
	} {
		if got := res.Why(c.name, c.unit); !strings.HasPrefix(got, c.want) {
			t.Errorf("Why(%s) = %q, want prefix %q", c.name, got, c.want)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkX-2":                      "BenchmarkX",
		"BenchmarkX/20-workers-16":          "BenchmarkX/20-workers",
		"BenchmarkX/20-workers":             "BenchmarkX/20-workers",
		"BenchmarkX/bridge-nosync-2":        "BenchmarkX/bridge-nosync",
		"BenchmarkGatewayRSSBacklog/1100-2": "BenchmarkGatewayRSSBacklog/1100",
		"BenchmarkX-":                       "BenchmarkX-",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEveryTargetHasARow: no target is dropped, measured or not, and each
// unmeasured row says why.
func TestEveryTargetHasARow(t *testing.T) {
	rows := Evaluate(&Inputs{Bench: &Results{}}, Targets())
	if len(rows) != len(Targets()) {
		t.Fatalf("%d rows for %d targets", len(rows), len(Targets()))
	}
	for _, r := range rows {
		if r.Verdict != NotMeasured || !strings.HasPrefix(r.Why, "not measured: ") {
			t.Errorf("%s on an empty run: %s %q", r.ID, r.Verdict, r.Why)
		}
	}
	seen := map[string]bool{}
	for _, tg := range Targets() {
		if seen[tg.ID] {
			t.Errorf("two targets named %q: the notes file could not tell them apart", tg.ID)
		}
		seen[tg.ID] = true
	}
}

// TestEvaluateRecordedRun judges the recorded run: ratios, verdicts, a
// missing figure, a skipped broker, a failed benchmark and a baseline of 0.
func TestEvaluateRecordedRun(t *testing.T) {
	rows := Evaluate(&Inputs{Bench: recorded(t), Load: recordedLoad(t), Broker: true}, Targets())
	for _, c := range []struct {
		id      string
		verdict Verdict
		ratio   float64 // 0: no ratio
		why     string  // prefix of Why
	}{
		{"P1 stdio vs roster", Missed, 1660000.0 / 490000, ""},
		{"P1 stdio vs no-op", Missed, 1660000.0 / 300000, ""},
		{"P1 http vs roster", Met, 1715000.0 / 1350000, ""},
		{"P1 stdio fsync off", Context, 870000.0 / 490000, ""},
		{"P5 20 workers", Missed, 358.0 / 300, ""},
		{"P5 1 worker", Context, 312.0 / 300, ""},
		{"P3 vs raw signed", NotMeasured, 0, "not measured: BenchmarkBrokerThroughput skipped: no broker"},
		{"P2 signed", NotMeasured, 0, "not measured: BenchmarkBrokerLatency skipped: no broker"},
		{"Throughput http", Missed, 705.0 / 1567, ""},
		{"Throughput stdio", NotMeasured, 0, "baseline measured 0: no ratio"},
		{"Cold start, gateway running", Met, 47.0 / 4, ""},
		{"Cold start, auto-start", NotMeasured, 0, "not measured: BenchmarkColdStart/mcp-autostart failed: gateway.json"},
		{"Memory 100k × 1 KiB", NotMeasured, 0, "not measured: BenchmarkGatewayRSSBacklog/100k-1KiB is not in this run's output"},
		{"Memory 10k × 1 KiB, embedded", Context, 21.5 / 19, ""},
		{"Load send→drain p50", Met, 8.5 / 14, ""},
		{"Load send→drain p99", Missed, 72.0 / 31, ""},
		{"Load errors", Missed, 0, ""},
		{"Load roster", Met, 14.0 / (1.35 / 2), ""},
		{"Roster summary, 1,000 entities", Met, 0, ""},
	} {
		r := rowByID(t, rows, c.id)
		if r.Verdict != c.verdict || r.HasRatio != (c.ratio != 0) || (c.ratio != 0 && !near(r.Ratio, c.ratio)) || !strings.HasPrefix(r.Why, c.why) {
			t.Errorf("%s: %s ratio %v (%v) why %q; want %s %v %q", c.id, r.Verdict, r.Ratio, r.HasRatio, r.Why, c.verdict, c.ratio, c.why)
		}
	}
}

// TestMissingInputsSayWhy: with no broker and no load tool, those rows say
// so, not that a benchmark failed.
func TestMissingInputsSayWhy(t *testing.T) {
	res, err := ParseBench(strings.NewReader("BenchmarkRoundTrip/http/roster-2 10 1000000 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	rows := Evaluate(&Inputs{Bench: res}, Targets())
	if r := rowByID(t, rows, "P2 signed"); r.Why != "not measured: no broker (RMQ_URL unset)" {
		t.Errorf("P2 without a broker: %q", r.Why)
	}
	if r := rowByID(t, rows, "Load roster"); r.Why != "not measured: load tool missing" {
		t.Errorf("load without the tool: %q", r.Why)
	}
	rows = Evaluate(&Inputs{Bench: res, Broker: true, LoadMissing: "load tool failed: see bench-out/load.err"}, Targets())
	if r := rowByID(t, rows, "P2 signed"); r.Why != "not measured: BenchmarkBrokerLatency/gateway is not in this run's output" {
		t.Errorf("P2 with a broker but no result: %q", r.Why)
	}
	if r := rowByID(t, rows, "Load errors"); r.Why != "not measured: load tool failed: see bench-out/load.err" {
		t.Errorf("load failed: %q", r.Why)
	}
}

func TestGoals(t *testing.T) {
	for _, c := range []struct {
		g       Goal
		v, b    float64
		met     bool
		printed string
	}{
		{Goal{Kind: RatioAtMost, Limit: 1.3}, 13, 10, true, "≤ 1.30×"},
		{Goal{Kind: RatioAtMost, Limit: 1.3}, 13.1, 10, false, "≤ 1.30×"},
		{Goal{Kind: RatioAtLeast, Limit: 0.8}, 8, 10, true, "≥ 0.80×"},
		{Goal{Kind: RatioAtLeast, Limit: 0.8}, 7.9, 10, false, "≥ 0.80×"},
		{Goal{Kind: AtMost, Limit: 100, Unit: "ms"}, 100, 4, true, "≤ 100 ms"},
		{Goal{Kind: Below, Limit: 64, Unit: "MiB"}, 64, 20, false, "< 64 MiB"},
		{Goal{Kind: OverAtMost, Limit: 50, Unit: "ms"}, 349, 300, true, "≤ +50 ms over the baseline"},
		{Goal{Kind: OverAtMost, Limit: 50, Unit: "ms"}, 351, 300, false, "≤ +50 ms over the baseline"},
		{Goal{Kind: AtMost}, 1, 0, false, "≤ 0"},
	} {
		if got := c.g.met(c.v, c.b, c.v/c.b); got != c.met {
			t.Errorf("%s with %v/%v: met %v", c.g, c.v, c.b, got)
		}
		if c.g.String() != c.printed {
			t.Errorf("goal printed %q, want %q", c.g, c.printed)
		}
	}
}

// TestParseLoadContract reads a hand-written object in the load tool's
// contract and refuses what is not one.
func TestParseLoadContract(t *testing.T) {
	l := recordedLoad(t)
	if l.Target != "in-process" || l.Primaries != 100 || l.Workers != 100 || l.Registered != 1000 ||
		l.Transports["http"] != 150 || l.Transports["stdio"] != 50 || l.DurationSeconds != 20.4 {
		t.Errorf("shape: %+v", l)
	}
	if l.Totals != (LoadTotals{Calls: 8123, Errors: 0, Accepted: 7000, Owed: 7300, Delivered: 7299, Lost: 1, PerSecond: 398.2}) {
		t.Errorf("totals: %+v", l.Totals)
	}
	if b, ok := loadKind(l, "brief"); !ok || b.DeliveryP50Ms != 8.5 || b.DeliveryP99Ms != 72 || b.CallP90Ms != 15 || b.PerSecond != 147.1 {
		t.Errorf("brief: %+v %v", b, ok)
	}
	if l.Gateway != (LoadGateway{RSSBytes: 50331648, CPUSeconds: 12.5, Goroutines: 800}) {
		t.Errorf("gateway: %+v", l.Gateway)
	}
	for _, bad := range []string{``, `{"kinds": []}`, `{"target": "x"}`, `[1,2]`, `{"kinds": [{"kind": "brief", "calls": "many"}]}`} {
		if _, err := ParseLoad(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseLoad(%q) accepted", bad)
		}
	}
	small := *l
	small.Primaries, small.Workers, small.Registered = 3, 3, 20
	rows := Evaluate(&Inputs{Load: &small, Bench: &Results{}}, Targets())
	if r := rowByID(t, rows, "Load errors"); r.Why != "not measured: the load run had 3 primaries + 3 workers and 20 registered; the target needs 100 + 100 and 1000" {
		t.Errorf("a smaller load run judged the target: %q", r.Why)
	}
	rows = Evaluate(&Inputs{Load: &Load{Primaries: 100, Workers: 100, Registered: 1000, Kinds: []LoadKind{{Kind: "poll"}, {Kind: "roster"}}}, Bench: &Results{}}, Targets())
	if r := rowByID(t, rows, "Load send→drain p50"); r.Why != `not measured: the load run has no "brief" kind` {
		t.Errorf("no brief kind: %q", r.Why)
	}
	if r := rowByID(t, rows, "Load roster"); r.Why != `not measured: the load run made no "roster" calls` {
		t.Errorf("a kind with no calls (its latencies 0) judged: %q", r.Why)
	}
}

func TestParseNotes(t *testing.T) {
	f, err := os.Open("testdata/notes.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	notes, err := ParseNotes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 2 || notes["P1 http vs roster"] != "A CPU profile of the HTTP round trip: half of it is the\nstreamable HTTP session's JSON encoding." ||
		notes["Load send→drain p99"] != "The p99 is a group commit waiting behind a poll's spill." {
		t.Errorf("notes: %q", notes)
	}
}

// TestRenderReport: the machine, one table row per target, the load run,
// and each miss with its note (or where to write one).
func TestRenderReport(t *testing.T) {
	f, _ := os.Open("testdata/notes.md")
	notes, _ := ParseNotes(f)
	f.Close()
	in := &Inputs{Bench: recorded(t), Load: recordedLoad(t)}
	m := Machine{CPU: "AMD EPYC 7B13", Cores: 2, RAM: "7.8 GiB", Kernel: "linux 6.1", Go: "go1.26.8", FsyncMs: 0.81,
		LoadStart: "3.10 2.50 2.00", LoadEnd: "2.20 2.40 2.10", Commit: "abc123", Date: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	if err := Render(&buf, Report{Machine: m, Rows: Evaluate(in, Targets()), Notes: notes, Load: in.Load, Raw: "bench-out"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"- CPU: AMD EPYC 7B13, 2 cores; RAM 7.8 GiB; linux 6.1; go1.26.8\n",
		"a 4 KiB write + fsync takes 0.81 ms",
		"3.10 2.50 2.00 at the start, 2.20 2.40 2.10 at the end",
		"**The machine was shared**",
		"- Broker: no (broker rows are not measured)",
		"- Commit: abc123; written 2026-12-01 11:00 UTC",
		"| P1 stdio vs roster | send+poll, fsync on: **1.66 ms** (median of 3) | 2× bridge_roster: 0.49 ms | 3.39× | ≤ 1.30× | **missed** |",
		"| P5 20 workers | brief→submitted p50, 20 at once: **358 ms** (median of 3) | herdr's submit delay: 300 ms | 1.19× | ≤ +50 ms over the baseline | **missed** |",
		"| Throughput stdio | 4 senders → 1 receiver, 1 KiB, fsync on: **1508 msgs/s** (median of 3) | the 4 sessions calling bridge_roster: 0 calls/s | — (baseline 0) | ≥ 0.80× | not measured |",
		"| Cold start, auto-start | `herdbridge mcp` starting the gateway, to tools listed: not measured: BenchmarkColdStart/mcp-autostart failed: gateway.json: no gateway started |",
		"| Load errors | errors + lost copies, all kinds: **1** | — (absolute goal) | — | ≤ 0 | **missed** |",
		"Load run (`herdbridge loadtest --json`): in-process, 100 primaries + 100 workers, 1000 registered, transports: http 150, stdio 50, 20.4 s",
		"- **P1 http vs roster**", // met: no entry
		"- **Load send→drain p99** — 72 ms (2.32×) against ≤ 50 ms. The p99 is a group commit waiting behind a poll's spill.\n",
		"- **P1 stdio vs roster** — 1.66 ms (3.39×) against ≤ 1.30×. no profile yet: add what it says under `## P1 stdio vs roster` in bench/notes.md\n",
	} {
		if want == "- **P1 http vs roster**" {
			if strings.Contains(out, want) {
				t.Errorf("a met row is listed among the misses")
			}
			continue
		}
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Count(out, "\n| ") != len(Targets())+1 {
		t.Errorf("%d table lines for %d targets", strings.Count(out, "\n| "), len(Targets()))
	}
	if testing.Verbose() {
		t.Log("\n" + out)
	}
}

// TestProbe reads this machine and measures fsync in a temp dir, leaving
// nothing behind.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	m := Probe(dir)
	if m.Cores < 1 || m.Go == "" {
		t.Errorf("probe: %+v", m)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %v", ents)
	}
	p := filepath.Join(dir, "loadavg")
	if err := os.WriteFile(p, []byte("0.52 0.58 0.59 1/467 12345\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := LoadAverage(p); got != "0.52 0.58 0.59" {
		t.Errorf("LoadAverage = %q", got)
	}
	if (Machine{Cores: 2, LoadStart: "0.52 0.58 0.59", LoadEnd: "5 5 5"}).busy() {
		t.Error("a quiet start read as a shared machine (the end includes the run itself)")
	}
}

func FuzzParseBench(f *testing.F) {
	raw, _ := os.ReadFile("testdata/bench.txt")
	f.Add(string(raw))
	f.Add("--- SKIP: BenchmarkX\n    x.go:1: why\nBenchmarkX-2 1 NaN ns/op\n")
	f.Fuzz(func(t *testing.T, s string) {
		res, err := ParseBench(strings.NewReader(s))
		if err != nil {
			return
		}
		rows := Evaluate(&Inputs{Bench: res}, Targets())
		var buf bytes.Buffer
		if err := Render(&buf, Report{Rows: rows}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseLoad(f *testing.F) {
	raw, _ := os.ReadFile("testdata/load.json")
	f.Add(string(raw))
	f.Add(`{"kinds":[{"kind":"roster","callP50Ms":1e308}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLoad(strings.NewReader(s))
		if err != nil {
			return
		}
		rows := Evaluate(&Inputs{Bench: &Results{}, Load: l}, Targets())
		var buf bytes.Buffer
		if err := Render(&buf, Report{Rows: rows, Load: l}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestParseBenchVerbose: with -v a skip's or failure's log comes before
// its "--- SKIP/FAIL" line, and a failure is mentioned for the benchmarks
// that never ran.
func TestParseBenchVerbose(t *testing.T) {
	const out = `BenchmarkA
BenchmarkA/ok
BenchmarkA/ok-2         	      10	        71.10 ns/op	         3.000 u/s
BenchmarkA/skip
    x_test.go:5: no broker: why
--- SKIP: BenchmarkA/skip
BenchmarkA/fail
    x_test.go:6: boom: 1
--- FAIL: BenchmarkA/fail
--- FAIL: BenchmarkA
BenchmarkB
    x_test.go:8: top skip
--- SKIP: BenchmarkB
FAIL
`
	res, err := ParseBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"BenchmarkA/skip":    "BenchmarkA/skip skipped: no broker: why",
		"BenchmarkA/fail":    "BenchmarkA/fail failed: boom: 1",
		"BenchmarkB/sub":     "BenchmarkB skipped: top skip",
		"BenchmarkC/later":   "BenchmarkC/later is not in this run's output (a benchmark failed, which can end its package's run)",
		"BenchmarkA/ok":      "BenchmarkA/ok ran without reporting msgs/s",
		"BenchmarkA/unknown": "BenchmarkA failed",
	} {
		if got := res.Why(name, "msgs/s"); got != want {
			t.Errorf("Why(%s) = %q, want %q", name, got, want)
		}
	}
	if v, _, ok := res.Median("BenchmarkA/ok", "u/s"); !ok || v != 3 {
		t.Errorf("BenchmarkA/ok u/s = %v %v", v, ok)
	}
}

// TestParseLoadToolOutput reads what `herdbridge loadtest --json` printed
// for a small run (--primaries 3 --workers 3 --register 20): it parses,
// and being smaller than the target's run it judges no target.
func TestParseLoadToolOutput(t *testing.T) {
	raw, err := os.ReadFile("testdata/load-small.json")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLoad(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := loadKind(l, "brief"); !ok || b.Calls == 0 || b.DeliveryP50Ms == 0 || l.Registered != 20 || l.Gateway.RSSBytes == 0 {
		t.Errorf("load tool output: %+v", l)
	}
	for _, r := range Evaluate(&Inputs{Bench: &Results{}, Load: l}, loadTargets()) {
		if !strings.HasPrefix(r.Why, "not measured: the load run had 3 primaries + 3 workers and 20 registered") {
			t.Errorf("%s: %s %q", r.ID, r.Verdict, r.Why)
		}
	}
}
