package benchreport

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func recordedScale(t *testing.T) (*Scale, *Sim) {
	t.Helper()
	f, err := os.Open("testdata/scale.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseScale(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Open("testdata/sim.json")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sim, err := ParseSim(g)
	if err != nil {
		t.Fatal(err)
	}
	return s, sim
}

// TestRenderScale: the section carries make scale's rows with the commit
// and date they were measured on, the ratio to per-entity presence of the
// same run, and the simulation's rows; without the files it says to run
// make scale.
func TestRenderScale(t *testing.T) {
	s, sim := recordedScale(t)
	var buf bytes.Buffer
	if err := Render(&buf, Report{Rows: Evaluate(&Inputs{Bench: recorded(t)}, Targets()), Scale: s, Sim: sim}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"## Scale (issue 25)", "measured 2026-12-02 17:18 UTC on commit f970796",
		"| 3 | 5 | by-host | 1.80 (1.80 + 0) | 0.167× |", "| 3 | 5 | per-entity | 10.8 (10.8 + 0) | — |",
		"| 100 | 20 | by-host | 5.00 | 10100 | 2020 | 101 |", "| 100 | 20 | per-entity |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "## Scale (issue 25)"), strings.Index(out, "## Misses"); i < 0 || j < i {
		t.Errorf("the scale section is not before the misses")
	}
	buf.Reset()
	if err := Render(&buf, Report{SimMissing: "benchreport: the simulation's JSON has no rows"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Real gateways: not measured in this run: run make scale.",
		"Simulated hosts (in-process, `bridge/memnet`): not measured in this run: run make scale (benchreport: the simulation's JSON has no rows)."} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestParseScaleRefuses(t *testing.T) {
	for _, bad := range []string{"", "{}", `{"rows":[]}`, `{"rows":[{"gateways":0}]}`, "not json"} {
		if _, err := ParseScale(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseScale(%q): no error", bad)
		}
	}
	for _, bad := range []string{"", `{"rows":[]}`, `{"rows":[{"hosts":0}]}`, `{"rows":{}}`} {
		if _, err := ParseSim(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSim(%q): no error", bad)
		}
	}
}

func FuzzParseScale(f *testing.F) {
	raw, _ := os.ReadFile("testdata/scale.json")
	f.Add(string(raw))
	f.Add(`{"rows":[{"gateways":20,"entitiesPerGateway":20,"mode":"by-host","deliveriesPerS":1e308},{"gateways":20,"entitiesPerGateway":20,"mode":"per-entity","deliveriesPerS":5e-324}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseScale(strings.NewReader(s))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Render(&buf, Report{Rows: Evaluate(&Inputs{Bench: &Results{}}, Targets()), Scale: sc}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseSim(f *testing.F) {
	raw, _ := os.ReadFile("testdata/sim.json")
	f.Add(string(raw))
	f.Add(`{"rows":[{"hosts":1000,"mode":"","deliveries_per_s":-1}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		sim, err := ParseSim(strings.NewReader(s))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Render(&buf, Report{Rows: Evaluate(&Inputs{Bench: &Results{}}, Targets()), Sim: sim}); err != nil {
			t.Fatal(err)
		}
	})
}
