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
}

// ParseBench reads the benchmark format `go test -bench` prints
// (https://go.dev/design/14313-benchmark-format): "BenchmarkName-N  iters
// value unit [value unit]...". Lines that are not benchmark results are
// skipped, except "cpu:" and the "--- SKIP:"/"--- FAIL:" lines that say why
// a benchmark has no result. Names lose their -GOMAXPROCS suffix, so no
// sub-benchmark name may end in "-digits".
func ParseBench(r io.Reader) (*Results, error) {
	res := &Results{values: map[string]map[string][]float64{}, outcome: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pending := "" // a SKIP/FAIL whose reason is on the next indented line
	for sc.Scan() {
		line := sc.Text()
		if pending != "" {
			if reason, ok := strings.CutPrefix(line, "    "); ok {
				res.outcome[pending] += ": " + stripLocation(strings.TrimSpace(reason))
			}
			pending = ""
		}
		switch {
		case strings.HasPrefix(line, "cpu: "):
			res.CPU = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
		case strings.HasPrefix(line, "--- SKIP: "), strings.HasPrefix(line, "--- FAIL: "):
			pending = res.noteOutcome(line)
		case strings.HasPrefix(line, "Benchmark"):
			res.addLine(line)
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
// own log output starting with "Benchmark") is ignored.
func (res *Results) addLine(line string) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return
	}
	vals := map[string]float64{}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return
		}
		vals[f[i+1]] = v
	}
	name := trimProcs(f[0])
	if res.values[name] == nil {
		res.values[name] = map[string][]float64{}
	}
	for unit, v := range vals {
		res.values[name][unit] = append(res.values[name][unit], v)
	}
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
	for n := name; n != ""; {
		if o, ok := res.outcome[n]; ok {
			return n + " " + o
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			break
		}
		n = n[:i]
	}
	if _, ran := res.values[name]; ran {
		return name + " ran without reporting " + unit
	}
	return name + " is not in this run's output"
}
