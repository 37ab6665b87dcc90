package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Results are the benchmark lines of one `go test -bench` run: every value
// by benchmark and unit (one per -count run), and why a benchmark reported
// nothing when the output says (a SKIP or FAIL line and its first log line).
type Results struct {
	CPU     string                          // the "cpu:" header line, if any
	values  map[string]map[string][]float64 // name -> unit -> values
	outcome map[string]string               // name -> "skipped: ..." / "failed: ..."
	failed  bool                            // some benchmark failed: without -v that ends its package's run
	split   string                          // a result line cut after its name (see addLine)
}

// ParseBench reads the benchmark format `go test -bench` prints
// (https://go.dev/design/14313-benchmark-format): "BenchmarkName-N  iters
// value unit [value unit]...". Lines that are not benchmark results are
// skipped, except "cpu:" and the "--- SKIP:"/"--- FAIL:" lines that say why
// a benchmark has no result, with the first log line that gives the reason:
// before the SKIP/FAIL line with -v, after a FAIL line without (skips are
// printed only with -v). Names lose their -GOMAXPROCS suffix, so no
// sub-benchmark name may end in "-digits".
func ParseBench(r io.Reader) (*Results, error) {
	res := &Results{values: map[string]map[string][]float64{}, outcome: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var logged []string // log lines since the last benchmark line (-v prints them before its SKIP/FAIL)
	pending := ""       // a SKIP/FAIL with no log before it: its reason may follow
	benchLog := false   // inside a "--- BENCH:" block: a passing benchmark's own log
	for sc.Scan() {
		line := sc.Text()
		if res.split != "" && res.addValues(res.split, strings.Fields(line)) {
			res.split = ""
			continue
		}
		logLine, isLog := strings.CutPrefix(line, "    ")
		if pending != "" && isLog && !strings.HasPrefix(strings.TrimSpace(logLine), "--- ") {
			res.outcome[pending] += ": " + stripLocation(strings.TrimSpace(logLine))
		}
		pending = ""
		if !isLog {
			benchLog = false
		}
		switch trimmed := strings.TrimLeft(line, " "); {
		case strings.HasPrefix(line, "cpu: "):
			res.CPU = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
		case strings.HasPrefix(trimmed, "--- SKIP: "), strings.HasPrefix(trimmed, "--- FAIL: "):
			name := res.noteOutcome(trimmed)
			if len(logged) > 0 && name != "" {
				res.outcome[name] += ": " + stripLocation(strings.TrimSpace(logged[0]))
			} else {
				pending = name
			}
			logged = nil
		case strings.HasPrefix(line, "--- BENCH: "):
			benchLog, logged = true, nil
		case isLog && !benchLog:
			logged = append(logged, logLine)
		case strings.HasPrefix(line, "Benchmark"):
			res.addLine(line)
			logged = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: reading benchmark output: %w", err)
	}
	return res, nil
}

// noteOutcome records a "--- SKIP: name (0.00s)" line and returns the name.
func (res *Results) noteOutcome(line string) string {
	verb := "skipped"
	if strings.HasPrefix(line, "--- FAIL: ") {
		verb = "failed"
		res.failed = true
	}
	fields := strings.Fields(line[len("--- SKIP: "):])
	if len(fields) == 0 {
		return ""
	}
	name := trimProcs(fields[0])
	res.outcome[name] = verb
	return name
}

// stripLocation drops the "file_test.go:12: " a test log line starts with.
func stripLocation(s string) string {
	if i := strings.Index(s, ".go:"); i > 0 && !strings.Contains(s[:i], " ") {
		if j := strings.Index(s[i+4:], ": "); j >= 0 {
			return s[i+4+j+2:]
		}
	}
	return s
}

// addLine parses one result line; a line that does not fit (a benchmark's
// own log output starting with "Benchmark") is ignored. A subprocess
// writing to the test's stderr can cut a result line in two: the name,
// then its output, then the figures on a line of their own; the name is
// kept until such a line comes.
func (res *Results) addLine(line string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	name := trimProcs(f[0])
	res.split = ""
	if !res.addValues(name, f[1:]) && len(f) > 1 {
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			res.split = name
		}
	}
}

// addValues records "iters value unit [value unit]..." for name, if f is that.
func (res *Results) addValues(name string, f []string) bool {
	if len(f) < 3 || len(f)%2 != 1 {
		return false
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return false
	}
	vals := map[string]float64{}
	for i := 1; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return false
		}
		vals[f[i+1]] = v
	}
	if res.values[name] == nil {
		res.values[name] = map[string][]float64{}
	}
	for unit, v := range vals {
		res.values[name][unit] = append(res.values[name][unit], v)
	}
	return true
}

// trimProcs drops the "-8" go test appends for GOMAXPROCS.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// Median is the median of name's unit over the run's counts and how many
// there were; ok is false when the run has none.
func (res *Results) Median(name, unit string) (median float64, runs int, ok bool) {
	vs := res.values[name][unit]
	if len(vs) == 0 {
		return 0, 0, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, len(s), true
}

// Why says why name has no unit, as the run's output tells it: the
// benchmark (or a parent) skipped or failed, or it ran without that metric.
func (res *Results) Why(name, unit string) string {
	if o, ok := res.outcome[name]; ok {
		return name + " " + o
	}
	if _, ran := res.values[name]; ran {
		return name + " ran without reporting " + unit
	}
	for n := name; strings.Contains(n, "/"); {
		n = n[:strings.LastIndexByte(n, '/')]
		if o, ok := res.outcome[n]; ok {
			return n + " " + o
		}
	}
	if res.failed {
		return name + " is not in this run's output (a benchmark failed, which can end its package's run)"
	}
	return name + " is not in this run's output"
}
