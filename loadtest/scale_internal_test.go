package loadtest

import (
	"strings"
	"testing"
	"time"
)

// TestParseStatCPU: utime + stime in ticks of 10 ms, counted from the
// command name's last parenthesis (a name may hold spaces and ')').
func TestParseStatCPU(t *testing.T) {
	stat := "4242 (beam.smp) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 30 0 1234 5678 900 0\n"
	if got, err := ParseStatCPU(stat); err != nil || got != 1750*time.Millisecond {
		t.Errorf("ParseStatCPU = %v, %v; want 1.75s", got, err)
	}
	odd := "7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 3 4 0 0\n"
	if got, err := ParseStatCPU(odd); err != nil || got != 70*time.Millisecond {
		t.Errorf("ParseStatCPU(odd name) = %v, %v; want 70ms", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if _, err := ParseStatCPU(bad); err == nil {
			t.Errorf("ParseStatCPU(%q): no error", bad)
		}
	}
}

func TestParseStatusRSS(t *testing.T) {
	if got := ParseStatusRSS("Name:\tbeam.smp\nVmRSS:\t  102400 kB\nThreads: 3\n"); got != 100<<20 {
		t.Errorf("VmRSS = %d, want 100 MiB", got)
	}
	if got := ParseStatusRSS("Name:\tzombie\n"); got != 0 {
		t.Errorf("no VmRSS = %d, want 0", got)
	}
}

// TestMetricSum: by name and labels, never a metric whose name only
// starts with it.
func TestMetricSum(t *testing.T) {
	body := `# HELP herdbridge_broker_deliveries_total x
# TYPE herdbridge_broker_deliveries_total counter
herdbridge_broker_deliveries_total{queue="control"} 7
herdbridge_broker_deliveries_total{queue="presence"} 1.5e+03
herdbridge_broker_deliveries_total_extra{queue="presence"} 9
herdbridge_broker_publishes_total 42
`
	for _, c := range []struct {
		name string
		want []string
		sum  float64
	}{
		{"herdbridge_broker_deliveries_total", []string{`queue="presence"`}, 1500},
		{"herdbridge_broker_deliveries_total", nil, 1507},
		{"herdbridge_broker_publishes_total", nil, 42},
		{"herdbridge_broker_deliveries_total", []string{`queue="inbox"`}, 0},
	} {
		if got := MetricSum(body, c.name, c.want...); got != c.sum {
			t.Errorf("MetricSum(%s, %v) = %v, want %v", c.name, c.want, got, c.sum)
		}
	}
}

// TestScaleMarkdown: the ratio is by-host ÷ per-entity of the same G and
// E, and the G=20 row is judged against issue 25's goals.
func TestScaleMarkdown(t *testing.T) {
	rep := &ScaleReport{Commit: "abc", Rows: []ScaleRow{
		{Gateways: 20, Entities: 20, Mode: ModeByHost, DeliveriesPerS: 84, ConvergeS: 0.5,
			RosterDefault: RosterSize{TextBytes: 100, StructuredBytes: 200}},
		{Gateways: 20, Entities: 20, Mode: ModePerEntity, DeliveriesPerS: 1680, ConvergeS: 4},
		{Gateways: 5, Entities: 20, Mode: ModeByHost, Error: "did not converge"},
	}}
	if q, ok := rep.Ratio(rep.Rows[0]); !ok || q != 0.05 {
		t.Errorf("ratio %v %v, want 0.05", q, ok)
	}
	if _, ok := rep.Ratio(rep.Rows[2]); ok {
		t.Error("a failed row has a ratio")
	}
	var b strings.Builder
	rep.Markdown(&b, nil, "not run")
	md := b.String()
	for _, want := range []string{"| 20 | 20 | by-host | 84.0 (0 + 0) | 0.050× |", "300 (100 + 200)",
		"0.050× (goal ≤ 0.1×): met", "0.500 s (goal ≤ 2.00 s): met", "**failed**: did not converge", "Not measured in this run: not run."} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestParseScaleAndSim(t *testing.T) {
	if _, err := ParseScale(strings.NewReader(`{"rows":[]}`)); err == nil {
		t.Error("a scale report without rows parsed")
	}
	s, err := ParseSim(strings.NewReader(`{"rows":[{"hosts":100,"entities_per_host":20,"mode":"by-host","interval_s":5,"deliveries_per_interval":10100,"deliveries_per_s":2020,"per_host_per_interval":101,"converge_s":1.5,"wall_s":40}]}`))
	if err != nil || s.Rows[0].Hosts != 100 || s.Rows[0].DeliveriesPerS != 2020 {
		t.Fatalf("ParseSim = %+v, %v", s, err)
	}
}
