// Command benchreport writes BENCHMARKS.md from one `make bench` run: the
// `go test -bench` output, the load tool's JSON (if it ran) and the notes
// on misses. `make bench` runs it; run it by hand to re-render a recorded
// run: go run ./internal/benchreport/cmd -bench bench-out/bench.txt -out /tmp/B.md
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
	flag.Parse()
	if err := run(*benchPath, *loadPath, *loadMissing, *notesPath, *out, *loadStart, *commit, *remark, *broker); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(benchPath, loadPath, loadMissing, notesPath, out, loadStart, commit, remark string, broker bool) error {
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
	var buf bytes.Buffer
	if err := benchreport.Render(&buf, benchreport.Report{Machine: m, Rows: benchreport.Evaluate(in, benchreport.Targets()),
		Notes: notes, Load: in.Load, Raw: filepath.Dir(benchPath)}); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
