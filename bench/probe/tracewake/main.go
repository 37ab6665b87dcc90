// Command tracewake reads a Go execution trace (go test -trace) and prints,
// for each place goroutines wait, how long a goroutine woken there stayed
// runnable before it ran: the wake-up cost of each hand-off. It also
// counts the Ps that went from idle to running and times the fdatasync
// system calls. bench/notes.md ("P1 stdio vs floor") compares the stdio
// round trip's trace with its floor's this way:
//
//	go test -c -o /tmp/gw.test ./gateway/
//	(cd gateway && /tmp/gw.test -test.run '^$' -test.bench 'RoundTrip/stdio/bridge$' -test.benchtime 400x -test.trace /tmp/rt.trace)
//	go run ./bench/probe/tracewake /tmp/rt.trace   (from bench/probe)
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: tracewake TRACE")
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	s, err := read(f)
	if err != nil {
		log.Fatal(err)
	}
	s.print(os.Stdout, 25)
}

// goState is what the reader keeps of one goroutine between events.
type goState struct {
	site   string     // where it last blocked
	wokeAt trace.Time // when it became runnable (0: not waiting to run)
	syncAt trace.Time // when it entered an fdatasync (0: not in one)
}

type summary struct {
	delays    map[string][]time.Duration // runnable → running, by wait site
	syncs     []time.Duration
	procWakes int
}

func read(r io.Reader) (*summary, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	s := &summary{delays: map[string][]time.Duration{}}
	gs := map[trace.GoID]*goState{}
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			if from, to := st.Proc(); from == trace.ProcIdle && to == trace.ProcRunning {
				s.procWakes++
			}
		case trace.ResourceGoroutine:
			id := st.Resource.Goroutine()
			g := gs[id]
			if g == nil {
				g = &goState{}
				gs[id] = g
			}
			s.transition(g, ev, st)
		}
	}
}

func (s *summary) transition(g *goState, ev trace.Event, st trace.StateTransition) {
	from, to := st.Goroutine()
	switch {
	case from == trace.GoRunning && to == trace.GoWaiting:
		g.site = waitSite(ev.Stack())
	case from == trace.GoWaiting && to == trace.GoRunnable:
		g.wokeAt = ev.Time()
	case from == trace.GoRunnable && to == trace.GoRunning:
		if g.wokeAt != 0 && g.site != "" {
			s.delays[g.site] = append(s.delays[g.site], ev.Time().Sub(g.wokeAt))
		}
		g.wokeAt = 0
	case from == trace.GoRunning && to == trace.GoSyscall:
		if inFdatasync(ev.Stack()) {
			g.syncAt = ev.Time()
		}
	case from == trace.GoSyscall && to != trace.GoSyscall:
		if g.syncAt != 0 {
			s.syncs = append(s.syncs, ev.Time().Sub(g.syncAt))
			g.syncAt = 0
		}
	}
}

// waitSite names a wait by its innermost frame and the first frame that
// is not the runtime's or the standard library's plumbing.
func waitSite(st trace.Stack) string {
	var first, caller string
	for f := range st.Frames() {
		if first == "" {
			first = f.Func
		}
		if !plumbing(f.Func) {
			caller = f.Func
			break
		}
	}
	return short(first) + " <- " + short(caller)
}

func plumbing(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "sync.", "io.", "net.", "os.", "bufio.", "syscall.", "context.", "time."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

func inFdatasync(st trace.Stack) bool {
	for f := range st.Frames() {
		if strings.Contains(f.Func, "Fdatasync") {
			return true
		}
	}
	return false
}

func short(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

func (s *summary) print(w io.Writer, top int) {
	fmt.Fprintf(w, "Ps woken from idle: %d\n", s.procWakes)
	if n := len(s.syncs); n > 0 {
		slices.Sort(s.syncs)
		fmt.Fprintf(w, "fdatasync: %d calls, median %v, p90 %v\n", n, s.syncs[n/2], s.syncs[n*9/10])
	}
	type row struct {
		site      string
		n         int
		med, mean time.Duration
		total     time.Duration
	}
	var rows []row
	for site, d := range s.delays {
		slices.Sort(d)
		var total time.Duration
		for _, x := range d {
			total += x
		}
		rows = append(rows, row{site, len(d), d[len(d)/2], total / time.Duration(len(d)), total})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.total - a.total) })
	fmt.Fprintf(w, "%7s %10s %10s %12s  %s\n", "wakes", "median", "mean", "total", "runnable → running, by where it waited")
	for _, r := range rows[:min(top, len(rows))] {
		fmt.Fprintf(w, "%7d %10v %10v %12v  %s\n", r.n, r.med, r.mean, r.total, r.site)
	}
}
