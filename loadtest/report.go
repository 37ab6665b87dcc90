package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// KindFigures is one kind of traffic's accounting and latency.
type KindFigures struct {
	Kind     Kind `json:"kind"`
	Sent     int  `json:"sent"`     // calls made
	Accepted int  `json:"accepted"` // calls with a status by which the fabric took the message
	// NotAccepted: refusals and errors (by status or error text); the
	// message is not owed to anyone.
	NotAccepted map[string]int `json:"notAccepted"`
	// Statuses: every call's status (or "error"), accepted or not.
	Statuses  map[string]int `json:"statuses"`
	Copies    int            `json:"copies"`    // copies owed: accepted × recipients
	Delivered int            `json:"delivered"` // owed copies delivered (once or more)
	Lost      int            `json:"lost"`      // owed copies never delivered, unexplained
	Explained int            `json:"explained"` // owed copies never delivered that the product reported (FAILED, uncertain)
	// ExpectedDuplicates: extra copies with a gateway kill -9 between them
	// (the documented at-least-once window), or of a send whose call a
	// kill cut and the retry published again.
	ExpectedDuplicates   int     `json:"expectedDuplicates"`
	UnexpectedDuplicates int     `json:"unexpectedDuplicates"`
	DeliveredUnaccepted  int     `json:"deliveredUnaccepted"` // copies of calls that got no accepted status, delivered anyway
	CallP50ms            float64 `json:"callP50ms"`           // the sending call, to its status
	CallP90ms            float64 `json:"callP90ms"`
	CallP99ms            float64 `json:"callP99ms"`
	DeliveryP50ms        float64 `json:"deliveryP50ms"` // call start to the first copy seen by its recipient
	DeliveryP90ms        float64 `json:"deliveryP90ms"`
	DeliveryP99ms        float64 `json:"deliveryP99ms"`
}

// CarriesMessages: the kind sends messages the ledger accounts for (not
// a poll or a roster read).
func (f KindFigures) CarriesMessages() bool { return f.Kind != KindPoll && f.Kind != KindRoster }

// Sample is one reading of a gateway's runtime figures.
type Sample struct {
	AtS        float64 `json:"atS"` // seconds since the start
	Host       string  `json:"host"`
	Up         bool    `json:"up"`
	Goroutines int     `json:"goroutines,omitempty"`
	HeapMiB    float64 `json:"heapMiB,omitempty"`
	RSSMiB     float64 `json:"rssMiB,omitempty"`
	// RSS split into anonymous (heap, stacks) and file-backed (binary,
	// store maps) pages, and the heap the runtime holds free: what a
	// rising RSS is made of.
	AnonMiB     float64 `json:"anonMiB,omitempty"`
	FileMiB     float64 `json:"fileMiB,omitempty"`
	HeapFreeMiB float64 `json:"heapFreeMiB,omitempty"`
	OpenFiles   int     `json:"openFiles,omitempty"`
}

// Flatness compares a gateway's figure in the second window (minute) of
// the run with the last: growth past 10% fails.
type Flatness struct {
	Host      string  `json:"host"`
	Metric    string  `json:"metric"`
	Second    float64 `json:"second"`
	Last      float64 `json:"last"`
	ChangePct float64 `json:"changePct"`
	OK        bool    `json:"ok"`
}

// Event is something the driver did to the system during the run.
type Event struct {
	AtS  float64 `json:"atS"`
	What string  `json:"what"`
}

// Report is the outcome of a run.
type Report struct {
	Started    time.Time      `json:"started"`
	Duration   string         `json:"duration"` // of the traffic; the drain follows
	DrainS     float64        `json:"drainS"`
	Machine    string         `json:"machine"`
	Gateways   []string       `json:"gateways"`
	Entities   map[string]int `json:"entities"` // by kind of agent
	Kinds      []KindFigures  `json:"kinds"`
	Total      KindFigures    `json:"total"`
	LostDetail []string       `json:"lostDetail,omitempty"` // the first ones
	// ErrorDetail: the first calls that failed, with when (a refusal is
	// owed to nobody, but says what an agent saw).
	ErrorDetail []string `json:"errorDetail,omitempty"`
	DupDetail   []string `json:"dupDetail,omitempty"`
	Untagged    int      `json:"untagged"`
	// ReceiveFailed: the agents' receiving polls that failed.
	ReceiveFailed int        `json:"receiveFailed"`
	Events        []Event    `json:"events"`
	Samples       []Sample   `json:"samples"`
	Flat          []Flatness `json:"flatness"`
	// Accounting: 0 lost and 0 unexpected duplicates. Pass: that, and
	// every gateway's RSS and goroutines flat.
	AccountingOK bool     `json:"accountingOK"`
	Pass         bool     `json:"pass"`
	Failures     []string `json:"failures,omitempty"`
}

const detailMax = 20

// Summary is the ledger's accounting: per kind (the message kinds, then
// poll, then roster if measured), the total of the message kinds, and the
// first lost, duplicated and failed calls.
type Summary struct {
	Kinds              []KindFigures
	Total              KindFigures
	Lost, Dups, Errors []string
	Untagged           int
	ReceiveFailed      int
}

// Summarize accounts for every call in l.
func (l *Ledger) Summarize() Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds, total, lost, dups, errs := l.summarizeSends()
	kinds = append(kinds, l.plainFigures(KindPoll))
	if l.plain[KindRoster] != nil {
		kinds = append(kinds, l.plainFigures(KindRoster))
	}
	for _, e := range l.callErrs {
		errs = appendMax(errs, e)
	}
	return Summary{Kinds: kinds, Total: total, Lost: lost, Dups: dups, Errors: errs, Untagged: l.untagged, ReceiveFailed: l.receiveFailed}
}

// summarizeSends accounts for every message sent (l.mu held).
func (l *Ledger) summarizeSends() (kinds []KindFigures, total KindFigures, lost, dups, errs []string) {
	byKind := map[Kind]*KindFigures{}
	calls, deliv := map[Kind][]time.Duration{}, map[Kind][]time.Duration{}
	for _, k := range Kinds {
		byKind[k] = &KindFigures{Kind: k, NotAccepted: map[string]int{}, Statuses: map[string]int{}}
	}
	for _, s := range l.sortedSends() {
		f := byKind[s.Kind]
		f.Sent++
		calls[s.Kind] = append(calls[s.Kind], s.CallTime)
		ok := s.done && accepted[s.Kind][s.Status]
		if ok {
			f.Accepted++
		} else {
			f.NotAccepted[refusal(s)]++
		}
		switch {
		case s.Err != "":
			f.Statuses["error"]++
			errs = appendMax(errs, fmt.Sprintf("%s %s %s at %s: %s", s.Tag, s.Kind, s.From, s.Start.Format("15:04:05.000"), clip(s.Err, 160)))
		case s.done:
			f.Statuses[s.Status]++
		}
		for _, to := range s.To {
			copies := l.got[s.Tag][to]
			if len(copies) > 0 {
				deliv[s.Kind] = append(deliv[s.Kind], copies[0].at.Sub(s.Start))
			}
			if !ok {
				if len(copies) > 0 {
					f.DeliveredUnaccepted++
				}
				continue
			}
			f.Copies++
			switch {
			case len(copies) == 0:
				if why := l.explained(s); why != "" {
					f.Explained++
				} else {
					f.Lost++
					lost = appendMax(lost, fmt.Sprintf("%s %s %s → %s: status %s msgId %s at +%s", s.Tag, s.Kind, s.From, to, s.Status, s.MsgID, s.Start.Format("15:04:05.000")))
				}
			default:
				f.Delivered++
				exp, unexp := classifyCopies(s, copies)
				f.ExpectedDuplicates += exp
				f.UnexpectedDuplicates += unexp
				if unexp > 0 {
					dups = appendMax(dups, fmt.Sprintf("%s %s %s → %s: %d copies, msgId %s", s.Tag, s.Kind, s.From, to, len(copies), s.MsgID))
				}
			}
		}
	}
	total = KindFigures{Kind: "total", NotAccepted: map[string]int{}, Statuses: map[string]int{}}
	for _, k := range Kinds {
		f := byKind[k]
		f.CallP50ms, f.CallP90ms, f.CallP99ms = percentiles(calls[k])
		f.DeliveryP50ms, f.DeliveryP90ms, f.DeliveryP99ms = percentiles(deliv[k])
		kinds = append(kinds, *f)
		total.Sent += f.Sent
		total.Accepted += f.Accepted
		total.Copies += f.Copies
		total.Delivered += f.Delivered
		total.Lost += f.Lost
		total.Explained += f.Explained
		total.ExpectedDuplicates += f.ExpectedDuplicates
		total.UnexpectedDuplicates += f.UnexpectedDuplicates
		total.DeliveredUnaccepted += f.DeliveredUnaccepted
		for r, n := range f.NotAccepted {
			total.NotAccepted[r] += n
		}
		for r, n := range f.Statuses {
			total.Statuses[r] += n
		}
	}
	return kinds, total, lost, dups, errs
}

// classifyCopies splits the extra copies of one recipient into expected
// (a kill of the recipient's gateway between two consecutive copies, or
// a send a kill cut and its retry published again) and unexpected. A
// forward into a pane is at-most-once: any extra copy is unexpected.
func classifyCopies(s *Send, copies []delivery) (expected, unexpected int) {
	sort.Slice(copies, func(i, j int) bool { return copies[i].at.Before(copies[j].at) })
	for i := 1; i < len(copies); i++ {
		if s.Kind != KindPaneBrief && (s.Straddled || killBetween(copies[i-1].mark, copies[i].mark)) {
			expected++
		} else {
			unexpected++
		}
	}
	return expected, unexpected
}

func refusal(s *Send) string {
	switch {
	case !s.done:
		return "no outcome (call still open)"
	case s.Err != "":
		return "error: " + clip(strings.ReplaceAll(s.Err, "\n", " "), 90)
	default:
		return "status " + s.Status
	}
}

func appendMax(list []string, s string) []string {
	if len(list) >= detailMax {
		return list
	}
	return append(list, s)
}

// percentiles is the p50, p90 and p99 of ds in milliseconds (nearest
// rank).
func percentiles(ds []time.Duration) (p50, p90, p99 float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		i = max(0, min(i, len(s)-1))
		return float64(s[i]) / float64(time.Millisecond)
	}
	return at(0.50), at(0.90), at(0.99)
}

// flatness compares, per host, the mean of RSS and of goroutines in the
// second window of the run with the last (windows of a minute, or a
// tenth of runs shorter than four minutes). Samples of a gateway that was
// down are left out.
func flatness(samples []Sample, hosts []string, run time.Duration) []Flatness {
	w := time.Minute
	if run < 4*time.Minute {
		w = run / 10
	}
	in := func(s Sample, from, to time.Duration) bool {
		at := time.Duration(s.AtS * float64(time.Second))
		return s.Up && at >= from && at < to
	}
	var out []Flatness
	for _, h := range hosts {
		for _, m := range []string{"rssMiB", "goroutines"} {
			var a, b []float64
			for _, s := range samples {
				if s.Host != h {
					continue
				}
				v := s.RSSMiB
				if m == "goroutines" {
					v = float64(s.Goroutines)
				}
				if in(s, w, 2*w) {
					a = append(a, v)
				}
				if in(s, run-w, run) {
					b = append(b, v)
				}
			}
			f := Flatness{Host: h, Metric: m, Second: mean(a), Last: mean(b)}
			if f.Second > 0 {
				f.ChangePct = 100 * (f.Last - f.Second) / f.Second
			}
			f.OK = len(a) > 0 && len(b) > 0 && f.Last <= f.Second*1.10
			out = append(out, f)
		}
	}
	return out
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// judge sets AccountingOK, Pass and Failures.
func (r *Report) judge() {
	r.Failures = nil
	if r.Total.Lost > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d message copies lost", r.Total.Lost))
	}
	if r.Total.UnexpectedDuplicates > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d unexpected duplicates", r.Total.UnexpectedDuplicates))
	}
	r.AccountingOK = len(r.Failures) == 0
	for _, f := range r.Flat {
		if !f.OK {
			r.Failures = append(r.Failures, fmt.Sprintf("%s %s not flat: %.1f in the second window, %.1f in the last (%+.1f%%)", f.Host, f.Metric, f.Second, f.Last, f.ChangePct))
		}
	}
	r.Pass = len(r.Failures) == 0
}

// Write writes the report as report.json and report.md into dir.
func (r *Report) Write(dir string) error {
	return writeReport(dir, "report", r, r.Markdown)
}

// writeReport writes v as name.json and md's text as name.md into dir
// (made if missing): the soak's report and the scale run's.
func writeReport(dir, name string, v any, md func(io.Writer)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name+".md"))
	if err != nil {
		return err
	}
	md(f)
	return f.Close()
}

// Markdown writes the report for people.
func (r *Report) Markdown(w io.Writer) {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL: " + strings.Join(r.Failures, "; ")
	}
	fmt.Fprintf(w, "# Soak report\n\n**%s**\n\n", verdict)
	fmt.Fprintf(w, "Started %s; traffic %s, then %.0f s of drain. Machine: %s.\n", r.Started.UTC().Format(time.RFC3339), r.Duration, r.DrainS, r.Machine)
	fmt.Fprintf(w, "Gateways: %s. Entities: %s.\n\n", strings.Join(r.Gateways, ", "), formatCounts(r.Entities))
	fmt.Fprint(w, "## Events\n\n")
	for _, e := range r.Events {
		at := r.Started.Add(time.Duration(e.AtS * float64(time.Second)))
		fmt.Fprintf(w, "- +%.1f s (%s): %s\n", e.AtS, at.Format("15:04:05.000"), e.What)
	}
	fmt.Fprint(w, "\n## Messages\n\n")
	fmt.Fprint(w, "Copies owed = accepted sends × recipients. Lost = owed, never delivered, not reported by the product. Explained = reported FAILED or `uncertain` to the sender. Expected duplicates = a gateway kill -9 between two copies (at-least-once, docs/tools.md \"Semantics\").\n\n")
	fmt.Fprintln(w, "| kind | sent | accepted | copies owed | delivered | lost | explained | dup expected | dup unexpected | call p50 / p90 / p99 ms | delivery p50 / p90 / p99 ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range append(append([]KindFigures(nil), r.Kinds...), r.Total) {
		lat := fmt.Sprintf("%.1f / %.1f / %.1f | %.1f / %.1f / %.1f", f.CallP50ms, f.CallP90ms, f.CallP99ms, f.DeliveryP50ms, f.DeliveryP90ms, f.DeliveryP99ms)
		if f.Kind == "total" {
			lat = " | "
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", f.Kind, f.Sent, f.Accepted, f.Copies, f.Delivered, f.Lost, f.Explained, f.ExpectedDuplicates, f.UnexpectedDuplicates, lat)
	}
	fmt.Fprint(w, "\nStatuses by kind:\n\n")
	for _, f := range r.Kinds {
		var parts []string
		for _, k := range sortedKeys(f.Statuses) {
			parts = append(parts, fmt.Sprintf("%s %d", k, f.Statuses[k]))
		}
		fmt.Fprintf(w, "- %s: %s\n", f.Kind, strings.Join(parts, ", "))
	}
	if len(r.Total.NotAccepted) > 0 {
		fmt.Fprint(w, "\nNot accepted (owed to nobody):\n\n")
		for _, k := range sortedKeys(r.Total.NotAccepted) {
			fmt.Fprintf(w, "- %d × %s\n", r.Total.NotAccepted[k], k)
		}
	}
	if r.ReceiveFailed > 0 {
		fmt.Fprintf(w, "\n%d of the agents' receiving polls failed.\n", r.ReceiveFailed)
	}
	if r.Total.DeliveredUnaccepted > 0 {
		fmt.Fprintf(w, "\n%d copies of calls that got no accepted status were delivered anyway.\n", r.Total.DeliveredUnaccepted)
	}
	writeList(w, "Lost (first ones)", r.LostDetail)
	writeList(w, "Unexpected duplicates (first ones)", r.DupDetail)
	writeList(w, "Calls that failed (first ones)", r.ErrorDetail)
	r.markdownRuntime(w)
}

func (r *Report) markdownRuntime(w io.Writer) {
	fmt.Fprint(w, "\n## Gateways over time\n\n")
	fmt.Fprintln(w, "| host | metric | second window | last window | change | flat |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, f := range r.Flat {
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %+.1f%% | %v |\n", f.Host, f.Metric, f.Second, f.Last, f.ChangePct, f.OK)
	}
	fmt.Fprintln(w, "\n| +s | host | goroutines | live heap MiB | heap free MiB | RSS MiB | anon MiB | file MiB | open files |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	every := max(1, len(r.Samples)/(40*max(1, len(r.Gateways))))
	seen := map[string]int{}
	for _, s := range r.Samples {
		seen[s.Host]++
		if (seen[s.Host]-1)%every != 0 {
			continue
		}
		if !s.Up {
			fmt.Fprintf(w, "| %.0f | %s | down | | | | | | |\n", s.AtS, s.Host)
			continue
		}
		fmt.Fprintf(w, "| %.0f | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %d |\n", s.AtS, s.Host, s.Goroutines,
			s.HeapMiB, s.HeapFreeMiB, s.RSSMiB, s.AnonMiB, s.FileMiB, s.OpenFiles)
	}
}

func writeList(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n\n", title)
	for _, s := range items {
		fmt.Fprintf(w, "- %s\n", s)
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
