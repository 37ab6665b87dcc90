package bridge

import (
	"fmt"
	"time"
)

// Reaping. An entity outside a herdr pane (a primary, an orchestrator, a
// worker that pulls) lives until someone removes it; one whose agent went
// away for good would hold, and keep collecting broadcast copies up to the
// inbox cap, forever. So an entity idle StaleAfter shows as stale in the
// roster, and one idle ReapAfter is removed with its inbox: what it held
// goes to the dead-letter log, and the sender of each brief or reply held
// there is told FAILED with the reason — never dropped silently.
//
// Idle means: no MCP session open (stdio or HTTP) and, since the last one
// closed, no activity — no tool call, no bearer-token request (an HTTP
// client may hold no session between calls), no registration. The last
// activity is saved in the entity's record at registration and then at
// most once every seenSaveEvery, so a restart loses at most that much of
// it; time the gateway was down does not make an entity reapable at once
// (seenAtLoad). Entities in a pane are left to the pane: they go when it
// closes.

// seenSaveEvery bounds how often an entity's last activity is written.
const seenSaveEvery = time.Hour

// StatusStale is the roster status of an entity idle past StaleAfter.
const StatusStale = "stale"

// seenAtLoad is the last activity of an entity loaded with saved, as the
// core counts it: an old record (zero) counts from now, and a gateway down
// long does not count against its entities beyond StaleAfter (they show
// stale, and have ReapAfter-StaleAfter to come back).
func (c *Core) seenAtLoad(saved time.Time) time.Time {
	now := c.cfg.Now()
	if saved.IsZero() {
		return now
	}
	if c.cfg.StaleAfter > 0 && now.Sub(saved) > c.cfg.StaleAfter {
		return now.Add(-c.cfg.StaleAfter)
	}
	return saved
}

// idle reports whether st, outside a pane, has been idle at least d
// (st.mu held); d <= 0: never.
func (c *Core) idle(st *entState, now time.Time, d time.Duration) bool {
	return d > 0 && st.PaneID == "" && st.sessions == 0 && len(st.waiters) == 0 && now.Sub(st.lastSeen) >= d
}

// reapOrSave reaps st if it was idle ReapAfter, else saves its last
// activity if the state file's is older than seenSaveEvery.
func (c *Core) reapOrSave(st *entState, now time.Time) {
	st.mu.Lock()
	st.seenIfAttached(now) // a session is open: active now
	reap := !st.removed && c.idle(st, now, c.cfg.ReapAfter)
	save := !st.removed && st.lastSeen.Sub(st.savedSeen) >= seenSaveEvery
	st.mu.Unlock()
	switch {
	case reap:
		c.reap(st, now)
	case save:
		c.saveSeen(st)
	}
}

// saveSeen writes st's record with its last activity.
func (c *Core) saveSeen(st *entState) {
	c.regMu.Lock() // not past a Remove: that would write the record back
	defer c.regMu.Unlock()
	st.mu.Lock()
	if st.removed {
		st.mu.Unlock()
		return
	}
	rec := st.record()
	st.mu.Unlock()
	if err := c.st.PutEntity(rec); err != nil {
		c.log.Warn("saving an entity's last activity failed", LogGID, st.GID, "err", err)
		return
	}
	st.mu.Lock()
	st.saved(rec.LastSeen)
	st.mu.Unlock()
}

// reap removes st, idle past ReapAfter (checked again under its lock):
// what it held is reported to each sender (removal.go).
func (c *Core) reap(st *entState, now time.Time) {
	var idle time.Duration
	var held int
	told, removed, err := c.removeEntity(c.ctx, st, "reaped", func(st *entState) (string, bool) {
		if !c.idle(st, now, c.cfg.ReapAfter) {
			return "", false
		}
		idle, held = now.Sub(st.lastSeen), st.unclaimedHeld()
		return fmt.Sprintf("%s was removed after %s without a session", st.Addr(), idleFor(idle)), true
	})
	if err != nil {
		c.log.Warn("reaping an idle entity failed", LogGID, st.GID, "name", st.Name, "err", err)
		return
	}
	if removed {
		c.log.Info("idle entity reaped", LogGID, st.GID, "name", st.Name, "idle", idle.Round(time.Minute), "held", held, "sendersTold", told)
	}
}

// idleFor says d in days, or hours under two days (short ones, set for
// tests, as a duration).
func idleFor(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return d.Round(time.Second).String()
}
