package benchreport

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Report is everything BENCHMARKS.md says.
type Report struct {
	Machine Machine
	Rows    []Row
	Notes   map[string]string // by target ID
	Load    *Load             // the load run's shape, when it ran
	Raw     string            // where the raw outputs are kept
	// Scale and Sim are make scale's reports (nil: missing, and
	// ScaleMissing / SimMissing say why when it is more than "not run").
	Scale        *Scale
	ScaleMissing string
	Sim          *Sim
	SimMissing   string
}

// Render writes the report as markdown.
func Render(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `make bench` (issue 15's targets). Each figure is the median of the run's `-count` runs and is\n" +
		"set against a baseline measured in the same run; the ratio is figure ÷ baseline. A row whose figure\n" +
		"is missing says why. Notes on misses come from `bench/notes.md`.\n\n")
	renderMachine(&b, r.Machine, r.Raw)
	renderTable(&b, r.Rows)
	renderLoad(&b, r.Load)
	renderScale(&b, r)
	renderMisses(&b, r.Rows, r.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}

func renderMachine(b *strings.Builder, m Machine, raw string) {
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(b, "- CPU: %s, %d cores; RAM %s; %s; %s\n", m.CPU, m.Cores, m.RAM, m.Kernel, m.Go)
	if m.FsyncMs > 0 {
		fmt.Fprintf(b, "- Disk: a 4 KiB write + fsync takes %s ms (median of 20, in the run's directory)\n", num(m.FsyncMs))
	}
	fmt.Fprintf(b, "- Load average (1, 5, 15 min): %s at the start, %s at the end (the end includes the run's own work)\n",
		orUnknown(m.LoadStart), orUnknown(m.LoadEnd))
	if m.busy() {
		b.WriteString("- **The machine was shared**: other work was running when the run began (load average above half the\n" +
			"  cores), so absolute figures are noisier than on a quiet machine; ratios, measured side by side, hold better.\n")
	}
	broker := "no (broker rows are not measured)"
	if m.BrokerURLSet {
		broker = "yes (RMQ_URL set)"
	}
	fmt.Fprintf(b, "- Broker: %s\n", broker)
	fmt.Fprintf(b, "- Commit: %s; written %s\n", orUnknown(m.Commit), m.Date.Format("2006-01-02 15:04 UTC"))
	if raw != "" {
		fmt.Fprintf(b, "- Raw outputs: `%s/` (not committed)\n", raw)
	}
	if m.Remark != "" {
		fmt.Fprintf(b, "- Note: %s\n", m.Remark)
	}
	b.WriteString("\n")
}

func renderTable(b *strings.Builder, rows []Row) {
	b.WriteString("## Targets\n\n")
	b.WriteString("| target | figure | baseline (same run) | ratio | goal | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", r.ID, figureCell(r), baselineCell(r), ratioCell(r), r.Goal, verdictCell(r))
	}
	b.WriteString("\n")
}

func figureCell(r Row) string {
	if strings.HasPrefix(r.Why, "not measured") { // the figure itself is missing
		return r.Figure.Label + ": " + r.Why
	}
	s := r.Figure.Label + ": **" + withUnit(r.Value, r.Figure.Unit) + "**"
	if r.Runs > 1 {
		s += fmt.Sprintf(" (median of %d)", r.Runs)
	}
	return s
}

func baselineCell(r Row) string {
	switch {
	case r.Baseline == nil:
		return "— (absolute goal)"
	case r.HasBase:
		return r.Baseline.Label + ": " + withUnit(r.Base, r.Baseline.Unit)
	case strings.HasPrefix(r.Why, "baseline "):
		return r.Baseline.Label + ": " + strings.TrimPrefix(r.Why, "baseline ")
	}
	return r.Baseline.Label
}

func ratioCell(r Row) string {
	switch {
	case r.HasRatio:
		return ratioText(r.Ratio)
	case r.HasBase && r.Base == 0:
		return "— (baseline 0)"
	}
	return "—"
}

func verdictCell(r Row) string {
	switch r.Verdict {
	case Met:
		return "met"
	case Missed:
		return "**missed**"
	}
	return string(r.Verdict)
}

func renderLoad(b *strings.Builder, l *Load) {
	if l == nil {
		return
	}
	fmt.Fprintf(b, "Load run (`herdbridge loadtest --json`): %s, %d primaries + %d workers, %d registered, transports: %s, %s s; "+
		"%d calls, %d accepted, %d owed, %d delivered, %d lost, %s calls/s; gateway RSS %s MiB, CPU %s s, %d goroutines.\n\n",
		l.Target, l.Primaries, l.Workers, l.Registered, transports(l.Transports), num(l.DurationSeconds),
		l.Totals.Calls, l.Totals.Accepted, l.Totals.Owed, l.Totals.Delivered, l.Totals.Lost, num(l.Totals.PerSecond),
		num(float64(l.Gateway.RSSBytes)/(1<<20)), num(l.Gateway.CPUSeconds), l.Gateway.Goroutines)
}

// transports prints the sessions per transport in a stable order.
func transports(t map[string]int) string {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, t[n])
	}
	return strings.Join(parts, ", ")
}

// renderMisses lists each missed row with what its note (a profile) says.
func renderMisses(b *strings.Builder, rows []Row, notes map[string]string) {
	b.WriteString("## Misses\n\n")
	n := 0
	for _, r := range rows {
		if r.Verdict != Missed {
			continue
		}
		n++
		note := notes[r.ID]
		if note == "" {
			note = fmt.Sprintf("no profile yet: add what it says under `## %s` in bench/notes.md", r.ID)
		}
		fig := withUnit(r.Value, r.Figure.Unit)
		if r.HasRatio {
			fig += " (" + ratioText(r.Ratio) + ")"
		}
		fmt.Fprintf(b, "- **%s** — %s against %s. %s\n", r.ID, fig, r.Goal, indent(note))
	}
	if n == 0 {
		b.WriteString("None.\n")
	}
}

// indent keeps a multi-line note inside its list item.
func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
