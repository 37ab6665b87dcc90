package sim

import (
	"sort"
	"sync"
)

// running names the actions under way, so a run whose actions outlive
// every healed fault says which ones (BreachStuck) instead of only
// counting the messages it could not drain meanwhile as lost.
type running struct {
	mu sync.Mutex
	m  map[string]int
}

func (r *running) start(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]int{}
	}
	r.m[what]++
}

func (r *running) done(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[what]--; r.m[what] <= 0 {
		delete(r.m, what)
	}
}

// list is what is still under way, sorted.
func (r *running) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.m))
	for what := range r.m {
		out = append(out, what)
	}
	sort.Strings(out)
	return out
}
