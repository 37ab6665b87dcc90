package benchreport

import (
	"errors"
	"fmt"
)

// Inputs are everything one run measured.
type Inputs struct {
	Bench *Results
	// Load is the load tool's output; nil when it did not run, LoadMissing says why.
	Load        *Load
	LoadMissing string
	// Broker says RMQ_URL was set for the run: a broker benchmark's absence
	// is then a fault of the run, not of its setup.
	Broker bool
}

// A Source reads one figure from a run: its value, how many runs it is the
// median of (0 for the load tool's single run), or why it is not there.
type Source struct {
	Label string // what was measured, as the table says it
	Unit  string // the unit shown: "ms", "msgs/s", "MiB", "" for a count
	read  func(in *Inputs) (v float64, runs int, err error)
}

// errNotMeasured's text is the table's "not measured: why".
type errNotMeasured struct{ why string }

func (e errNotMeasured) Error() string { return "not measured: " + e.why }

func notMeasured(format string, args ...any) error {
	return errNotMeasured{fmt.Sprintf(format, args...)}
}

// bench is the median of a benchmark's metric, times scale (ns/op to ms: 1e-6).
func bench(label, name, unit string, scale float64, shown string, needsBroker bool) Source {
	return Source{Label: label, Unit: shown, read: func(in *Inputs) (float64, int, error) {
		if in.Bench == nil {
			return 0, 0, notMeasured("no benchmark output")
		}
		v, n, ok := in.Bench.Median(name, unit)
		if !ok {
			if needsBroker && !in.Broker {
				return 0, 0, notMeasured("no broker (RMQ_URL unset)")
			}
			return 0, 0, notMeasured("%s", in.Bench.Why(name, unit))
		}
		return v * scale, n, nil
	}}
}

// sum adds two sources of the same unit (a delay and the overhead over it).
func sum(label string, a, b Source) Source {
	return Source{Label: label, Unit: a.Unit, read: func(in *Inputs) (float64, int, error) {
		va, na, err := a.read(in)
		if err != nil {
			return 0, 0, err
		}
		vb, nb, err := b.read(in)
		if err != nil {
			return 0, 0, err
		}
		return va + vb, min(na, nb), nil
	}}
}

// load reads a figure from the load tool's JSON.
func load(label, unit string, get func(l *Load) (float64, error)) Source {
	return Source{Label: label, Unit: unit, read: func(in *Inputs) (float64, int, error) {
		if in.Load == nil {
			why := in.LoadMissing
			if why == "" {
				why = "load tool missing"
			}
			return 0, 0, notMeasured("%s", why)
		}
		if err := loadShape(in.Load); err != nil {
			return 0, 0, err
		}
		v, err := get(in.Load)
		if err != nil {
			var nm errNotMeasured
			if !errors.As(err, &nm) {
				err = notMeasured("%v", err)
			}
			return 0, 0, err
		}
		return v, 1, nil
	}}
}

// kindField reads one field of one kind of the load run.
func kindField(kind string, field func(LoadKind) float64) func(l *Load) (float64, error) {
	return func(l *Load) (float64, error) {
		k, ok := loadKind(l, kind)
		if !ok {
			return 0, notMeasured("the load run has no %q kind", kind)
		}
		if k.Calls == 0 {
			return 0, notMeasured("the load run made no %q calls", kind)
		}
		return field(k), nil
	}
}

// The load targets are for 100 primaries and 100 workers on one gateway
// with 1,000 registered entities: a smaller run (LOADTEST_ARGS changed)
// is shown under the table but judges no target.
const (
	loadPrimaries  = 100
	loadWorkers    = 100
	loadRegistered = 1000
)

func loadShape(l *Load) error {
	if l.Primaries < loadPrimaries || l.Workers < loadWorkers || l.Registered < loadRegistered {
		return notMeasured("the load run had %d primaries + %d workers and %d registered; the target needs %d + %d and %d",
			l.Primaries, l.Workers, l.Registered, loadPrimaries, loadWorkers, loadRegistered)
	}
	return nil
}
