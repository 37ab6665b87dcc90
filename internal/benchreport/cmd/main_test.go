package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWritesReport renders the recorded run as make bench does: a load
// JSON that is not one turns the load rows into "not measured" with both
// reasons, and a missing notes file is no error.
func TestRunWritesReport(t *testing.T) {
	dir := t.TempDir()
	bench, err := os.ReadFile("../testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	benchPath := filepath.Join(dir, "bench.txt")
	loadPath := filepath.Join(dir, "load.json")
	for p, body := range map[string]string{benchPath: string(bench), loadPath: "loadtest: unknown flag --json\n",
		filepath.Join(dir, "loadavg-start.txt"): "0.10 0.20 0.30 1/100 42\n"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "BENCHMARKS.md")
	if err := run(benchPath, loadPath, "herdbridge loadtest printed no report", filepath.Join(dir, "no-notes.md"), out,
		filepath.Join(dir, "loadavg-start.txt"), "abc123", "a test", true, scaleFiles{filepath.Join(dir, "no-scale.json"), ""}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"0.10 0.20 0.30 at the start", "- Commit: abc123;", "- Note: a test", "- Broker: yes (RMQ_URL set)",
		"| Load errors | errors + lost copies, all kinds: not measured: herdbridge loadtest printed no report (benchreport: the load tool's JSON: invalid character",
		"| P1 stdio vs roster | send+poll, fsync on: **1.66 ms**",
		"## Scale (issue 25)", "Real gateways: not measured in this run: run make scale.",
		"Simulated hosts (in-process, `bridge/memnet`): not measured in this run: run make scale.",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if err := run(filepath.Join(dir, "none.txt"), "", "", "", out, "", "", "", false, scaleFiles{}); err == nil || !strings.Contains(err.Error(), "make bench") {
		t.Errorf("no benchmark output: %v", err)
	}
}
