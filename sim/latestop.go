package sim

// Stops that land late. A stop of a worker on another host whose call did
// not answer "stopped" (its gateway's broker link was cut: the STOP waits
// in an outbox) may still stop it once the link returns. The run must then
// know the worker is gone — its open asks have nobody left to resume them,
// its reports nobody to reach — or it holds the worker's turns against the
// fabric forever.

// orderedStop is a stop whose call did not say the worker stopped.
type orderedStop struct {
	name, gid string
}

// stopOrdered remembers that a stop of name (as gid) may still land.
func (r *runner) stopOrdered(name string) {
	gid, alive := r.ents[name].state()
	if !alive {
		return
	}
	r.stallMu.Lock()
	defer r.stallMu.Unlock()
	r.stops = append(r.stops, orderedStop{name: name, gid: gid})
}

// noteLateStops marks gone the workers a remembered stop has since
// stopped; the others stay remembered while that incarnation lives.
func (r *runner) noteLateStops() {
	r.stallMu.Lock()
	stops := r.stops
	r.stops = nil
	r.stallMu.Unlock()
	var keep []orderedStop
	for _, s := range stops {
		e := r.ents[s.name]
		if gid, alive := e.state(); !alive || gid != s.gid {
			continue
		}
		core, _, up := r.gws[e.host].snapshot()
		if !up {
			keep = append(keep, s)
			continue
		}
		if _, still := core.Entity(s.gid); still {
			keep = append(keep, s)
			continue
		}
		r.gone(s.name)
	}
	r.stallMu.Lock()
	r.stops = append(r.stops, keep...)
	r.stallMu.Unlock()
}
