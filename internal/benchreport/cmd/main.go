// Command benchreport writes BENCHMARKS.md from one `make bench` run: the
// `go test -bench` output, the load tool's JSON (if it ran) and the notes
// on misses, and make scale's reports when they are there. `make bench`
// runs it; run it by hand to re-render a recorded run:
// go run ./internal/benchreport/cmd -bench bench-out/bench.txt -scale scale-out/scale.json -sim scale-out/sim.json -out /tmp/B.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/herdbridge/herdbridge/internal/benchreport"
)

func main() {
	benchPath := flag.String("bench", "bench-out/bench.txt", "`go test -bench` output of the run")
	loadPath := flag.String("load", "", "the load tool's --json output (absent: the load rows say -load-missing)")
	loadMissing := flag.String("load-missing", "load tool missing", "why there is no load JSON, for the load rows")
	notesPath := flag.String("notes", "bench/notes.md", "notes on misses, one \"## <target>\" section each")
	out := flag.String("out", "BENCHMARKS.md", "the report to write")
	loadStart := flag.String("loadavg-start", "", "a copy of /proc/loadavg taken when the run began")
	commit := flag.String("commit", "", "the commit benchmarked")
	broker := flag.Bool("broker", false, "RMQ_URL was set for the run")
	remark := flag.String("remark", "", "a sentence about the run, printed with the machine")
	scalePath := flag.String("scale", "", "make scale's scale-out/scale.json (absent: the scale section says it was not measured)")
	simPath := flag.String("sim", "", "make scale's scale-out/sim.json, the in-process simulation (absent: not measured)")
	flag.Parse()
	if err := run(*benchPath, *loadPath, *loadMissing, *notesPath, *out, *loadStart, *commit, *remark, *broker, scaleFiles{*scalePath, *simPath}); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// scaleFiles are make scale's two reports ("": not given).
type scaleFiles struct{ scale, sim string }

// read reads each report that is there; one that is missing or does not
// parse is left nil, with why (a missing file is just "not measured").
func (f scaleFiles) read(r *benchreport.Report) {
	if f.scale != "" {
		if sf, err := os.Open(f.scale); err == nil {
			r.Scale, err = benchreport.ParseScale(sf)
			sf.Close()
			if err != nil {
				r.ScaleMissing = err.Error()
			}
		}
	}
	if f.sim != "" {
		if sf, err := os.Open(f.sim); err == nil {
			r.Sim, err = benchreport.ParseSim(sf)
			sf.Close()
			if err != nil {
				r.SimMissing = err.Error()
			}
		}
	}
}

func run(benchPath, loadPath, loadMissing, notesPath, out, loadStart, commit, remark string, broker bool, scale scaleFiles) error {
	in := &benchreport.Inputs{Broker: broker, LoadMissing: loadMissing}
	f, err := os.Open(benchPath)
	if err != nil {
		return fmt.Errorf("%w (run `make bench`, which writes it)", err)
	}
	in.Bench, err = benchreport.ParseBench(f)
	f.Close()
	if err != nil {
		return err
	}
	if loadPath != "" {
		if lf, err := os.Open(loadPath); err == nil {
			in.Load, err = benchreport.ParseLoad(lf)
			lf.Close()
			if err != nil {
				in.LoadMissing = fmt.Sprintf("%s (%v)", loadMissing, err)
			}
		}
	}
	notes := map[string]string{}
	if nf, err := os.Open(notesPath); err == nil {
		notes, err = benchreport.ParseNotes(nf)
		nf.Close()
		if err != nil {
			return err
		}
	}
	m := benchreport.Probe(filepath.Dir(benchPath))
	m.LoadStart, m.Commit, m.Remark, m.BrokerURLSet = benchreport.LoadAverage(loadStart), commit, remark, broker
	if m.CPU == "unknown" && in.Bench.CPU != "" {
		m.CPU = in.Bench.CPU
	}
	rep := benchreport.Report{Machine: m, Rows: benchreport.Evaluate(in, benchreport.Targets()),
		Notes: notes, Load: in.Load, Raw: filepath.Dir(benchPath)}
	scale.read(&rep)
	var buf bytes.Buffer
	if err := benchreport.Render(&buf, rep); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
