package sim

import (
	"fmt"
	"log/slog"
	"time"
)

// convergeWait bounds the gateways finding each other at the start.
const convergeWait = 10 * time.Second

// Run executes s (its gateways' state directories from disks) and checks
// the invariant once the run is quiet.
func Run(s Schedule, disks DiskFaults, log *slog.Logger) (*Report, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := newWorld(s, disks, log)
	if err != nil {
		return nil, err
	}
	defer w.close()
	for _, g := range w.gws {
		if err := w.boot(g); err != nil {
			return nil, fmt.Errorf("sim: start gateway %s: %w", g.id, err)
		}
	}
	if !w.converge(time.Now().Add(convergeWait)) {
		return nil, fmt.Errorf("sim: the gateways did not see each other within %v", convergeWait)
	}
	r := &runner{world: w, tags: &tagger{seed: s.Seed}}
	killed := map[int]bool{}
	for _, st := range s.Steps {
		for _, a := range st.Actions {
			if a.Op == OpKill {
				killed[a.Host] = true
			}
		}
		r.round(st)
	}
	settled := r.quiesce()
	rep := w.check(settled, killed, w.deadLetters())
	for _, what := range r.stuck {
		rep.breach(BreachStuck, fmt.Sprintf("%s: still running %v after every fault was healed", what, quiesceWait))
	}
	return rep, nil
}
