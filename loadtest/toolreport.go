package loadtest

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
)

// ToolReport is what `herdbridge loadtest` reports. Its JSON is a
// contract with the `make bench` report that parses it: fields are never
// renamed.
type ToolReport struct {
	Target          string         `json:"target"` // "in-process" or "<host>@<state dir>"
	Primaries       int            `json:"primaries"`
	Workers         int            `json:"workers"`
	Registered      int            `json:"registered"` // idle entities pre-registered (--register)
	Transports      map[string]int `json:"transports"` // agents by transport: http, stdio
	DurationSeconds float64        `json:"durationSeconds"`
	Totals          ToolTotals     `json:"totals"`
	Kinds           []ToolKind     `json:"kinds"`
	Gateway         ToolGateway    `json:"gateway"`
	// Failures are the first failed calls, lost copies and duplicates,
	// for people (not in the JSON contract).
	Failures []string `json:"-"`
}

// ToolTotals: calls and their rate are the traffic's (the roster reads
// before it are left out); errors are every kind's, the agents' failed
// receiving polls included; accepted, owed, delivered and lost count the
// messages (a broadcast owes a copy per member).
type ToolTotals struct {
	Calls     int     `json:"calls"`
	Errors    int     `json:"errors"`
	Accepted  int     `json:"accepted"`
	Owed      int     `json:"owed"`
	Delivered int     `json:"delivered"`
	Lost      int     `json:"lost"`
	PerSecond float64 `json:"perSecond"`
}

// ToolKind is one kind's calls, failures and latencies. Errors: calls
// that failed or were refused, plus copies lost, reported FAILED or
// duplicated. Delivery is call start to the recipient's poll returning
// the copy (0 for polls and roster reads, which carry no message).
type ToolKind struct {
	Kind          string  `json:"kind"`
	Calls         int     `json:"calls"`
	Errors        int     `json:"errors"`
	PerSecond     float64 `json:"perSecond"`
	CallP50Ms     float64 `json:"callP50Ms"`
	CallP90Ms     float64 `json:"callP90Ms"`
	CallP99Ms     float64 `json:"callP99Ms"`
	DeliveryP50Ms float64 `json:"deliveryP50Ms"`
	DeliveryP90Ms float64 `json:"deliveryP90Ms"`
	DeliveryP99Ms float64 `json:"deliveryP99Ms"`
}

// ToolGateway is what the run cost the gateway process: its peak RSS and
// goroutines (sampled every second, and at the end) and the CPU time it
// used from the traffic's start to the end of the drain.
type ToolGateway struct {
	RSSBytes   uint64  `json:"rssBytes"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Goroutines int     `json:"goroutines"`
	// Restarted: the gateway did not answer for a while, or its CPU time
	// went back — a new process. CPUSeconds is then the new process's
	// alone (what it used from its start), not the run's.
	Restarted bool `json:"restarted,omitempty"`
}

// OK: no error and nothing lost (the load tool's exit status 0).
func (r *ToolReport) OK() bool { return r.Totals.Errors == 0 && r.Totals.Lost == 0 }

// runFacts is what the report says about a run besides the ledger.
type runFacts struct {
	label             string
	registered        int
	ran, rosterTook   time.Duration
	before, after     gateway.RuntimeStats
	primaries, worker int
}

func buildToolReport(eng *Engine, smp *Sampler, f runFacts) *ToolReport {
	sum := eng.Ledger.Summarize()
	tr := map[string]int{}
	for t, n := range eng.Transports() {
		tr[string(t)] = n
	}
	r := &ToolReport{Target: f.label, Primaries: f.primaries, Workers: f.worker, Registered: f.registered,
		Transports: tr, DurationSeconds: round(f.ran.Seconds(), 2)}
	for _, k := range sum.Kinds {
		per := f.ran
		if k.Kind == KindRoster {
			per = f.rosterTook
		}
		tk := toolKind(k, per)
		r.Kinds = append(r.Kinds, tk)
		r.Totals.Errors += tk.Errors
		if k.Kind != KindRoster {
			r.Totals.Calls += tk.Calls
		}
	}
	r.Totals.Errors += sum.ReceiveFailed
	r.Totals.Accepted, r.Totals.Owed = sum.Total.Accepted, sum.Total.Copies
	r.Totals.Delivered, r.Totals.Lost = sum.Total.Delivered, sum.Total.Lost
	r.Totals.PerSecond = rate(r.Totals.Calls, f.ran)
	r.Gateway = peakRuntime(smp, f.after)
	r.Gateway.Restarted = r.Gateway.Restarted || f.after.CPUSeconds < f.before.CPUSeconds
	if r.Gateway.Restarted {
		r.Gateway.CPUSeconds = round(f.after.CPUSeconds, 2)
	} else {
		r.Gateway.CPUSeconds = round(f.after.CPUSeconds-f.before.CPUSeconds, 2)
	}
	r.Failures = append(append(append([]string(nil), sum.Errors...), sum.Lost...), sum.Dups...)
	return r
}

// toolKind is k's figures for the tool, its rate over d.
func toolKind(k KindFigures, d time.Duration) ToolKind {
	errs := 0
	for _, n := range k.NotAccepted {
		errs += n
	}
	errs += k.Lost + k.Explained + k.UnexpectedDuplicates
	return ToolKind{Kind: string(k.Kind), Calls: k.Sent, Errors: errs, PerSecond: rate(k.Sent, d),
		CallP50Ms: round(k.CallP50ms, 2), CallP90Ms: round(k.CallP90ms, 2), CallP99Ms: round(k.CallP99ms, 2),
		DeliveryP50Ms: round(k.DeliveryP50ms, 2), DeliveryP90Ms: round(k.DeliveryP90ms, 2), DeliveryP99Ms: round(k.DeliveryP99ms, 2)}
}

// peakRuntime is the highest RSS and goroutine count of the samples and
// of the last reading.
func peakRuntime(smp *Sampler, last gateway.RuntimeStats) ToolGateway {
	g := ToolGateway{RSSBytes: last.RSSBytes, Goroutines: last.Goroutines}
	smp.mu.Lock()
	defer smp.mu.Unlock()
	for _, s := range smp.samples {
		if !s.Up {
			g.Restarted = true
			continue
		}
		// RSSMiB is a whole number of KiB over 2^20: exact in a float64
		g.RSSBytes = max(g.RSSBytes, uint64(math.Round(s.RSSMiB*(1<<20))))
		g.Goroutines = max(g.Goroutines, s.Goroutines)
	}
	return g
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n)/d.Seconds(), 2)
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// WriteTable writes the report for people: a row per kind, the totals,
// the gateway's cost, the verdict and the first failures.
func (r *ToolReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "herdbridge loadtest against %s: %d primaries, %d workers (%s), %d idle entities registered, %.1f s of traffic\n\n",
		r.Target, r.Primaries, r.Workers, transportsText(r.Transports), r.Registered, r.DurationSeconds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "KIND\tCALLS\tERRORS\tPER S\tCALL MS P50\tP90\tP99\tDELIVERY MS P50\tP90\tP99\t")
	for _, k := range r.Kinds {
		deliv := fmt.Sprintf("%.1f\t%.1f\t%.1f", k.DeliveryP50Ms, k.DeliveryP90Ms, k.DeliveryP99Ms)
		if k.Kind == string(KindPoll) || k.Kind == string(KindRoster) {
			deliv = "-\t-\t-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", k.Kind, k.Calls, k.Errors, k.PerSecond, k.CallP50Ms, k.CallP90Ms, k.CallP99Ms, deliv)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%.1f\t\t\t\t\t\t\t\n", r.Totals.Calls, r.Totals.Errors, r.Totals.PerSecond)
	_ = tw.Flush()
	t := r.Totals
	fmt.Fprintf(w, "\nmessages: %d accepted, %d copies owed, %d delivered, %d lost\n", t.Accepted, t.Owed, t.Delivered, t.Lost)
	g := r.Gateway
	cpu := fmt.Sprintf("CPU %.2f s over the run (%.2f of a core)", g.CPUSeconds, g.CPUSeconds/max(r.DurationSeconds, 0.001))
	if g.Restarted {
		cpu = fmt.Sprintf("CPU %.2f s in the process that answered last (the gateway did not answer for a while or restarted during the run)", g.CPUSeconds)
	}
	fmt.Fprintf(w, "gateway: RSS %.1f MiB (peak), %s, %d goroutines (peak)\n", float64(g.RSSBytes)/(1<<20), cpu, g.Goroutines)
	if r.Target == "in-process" {
		fmt.Fprintln(w, "  (in-process: the gateway shares this process with the HTTP agents; its RSS and CPU include theirs)")
	}
	if r.OK() {
		fmt.Fprintln(w, "result: OK (no error, nothing lost)")
		return
	}
	fmt.Fprintf(w, "result: FAIL (%d errors, %d lost)\n", t.Errors, t.Lost)
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, "first failures:\n  %s\n", strings.Join(r.Failures, "\n  "))
	}
}

func transportsText(m map[string]int) string {
	return fmt.Sprintf("http %d, stdio %d", m[string(HTTP)], m[string(Stdio)])
}
