package bridge

import "time"

// activity is the part of an entity's record that says how it is in use:
// its open MCP sessions, since when none is (the reattach grace runs from
// then, sweep.go), its last activity and the last one the state file has
// (reap.go), and its pane's live herdr status (the roster's). Its
// entState's mu guards it; every method runs with mu held. It owns the
// rule that detachedAt is set exactly while no session is open after one
// closed, and cleared by a new one or by the grace running out.
type activity struct {
	sessions   int
	paneStatus string // live herdr agent status, for the roster
	detachedAt time.Time
	lastSeen   time.Time // last activity: a session open or ending, a tool call, a registration (reap.go)
	savedSeen  time.Time // lastSeen as the state file has it
}

// attach records one more open session at now.
func (a *activity) attach(now time.Time) {
	a.sessions++
	a.detachedAt = time.Time{}
	a.lastSeen = now
}

// detach records that a session closed at now; the last one starts the
// reattach grace. With none open it does nothing.
func (a *activity) detach(now time.Time) {
	if a.sessions == 0 {
		return
	}
	a.sessions--
	if a.sessions == 0 {
		a.detachedAt = now
	}
	a.lastSeen = now
}

// detachedAtLoad starts the reattach grace at now for an entity whose
// turns come back from the state file: none of its sessions is open yet.
func (a *activity) detachedAtLoad(now time.Time) { a.detachedAt = now }

// graceOver reports, once, that the last session closed at least grace
// before now and none came back: the grace ends here.
func (a *activity) graceOver(now time.Time, grace time.Duration) bool {
	if a.sessions != 0 || a.detachedAt.IsZero() || now.Sub(a.detachedAt) < grace {
		return false
	}
	a.detachedAt = time.Time{}
	return true
}

// seen records activity at now.
func (a *activity) seen(now time.Time) { a.lastSeen = now }

// seenIfAttached records activity at now if a session is open.
func (a *activity) seenIfAttached(now time.Time) {
	if a.sessions > 0 {
		a.lastSeen = now
	}
}

// saved records that the state file has last as the last activity.
func (a *activity) saved(last time.Time) { a.savedSeen = last }

// loadSeen sets both from the state file: last activity seen, saved as saved.
func (a *activity) loadSeen(seen, saved time.Time) { a.lastSeen, a.savedSeen = seen, saved }

// setPaneStatus records the pane's live herdr status.
func (a *activity) setPaneStatus(status string) { a.paneStatus = status }
