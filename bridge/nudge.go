package bridge

import (
	"time"
)

// Nudger is told when messages are held for an entity that has no open
// waiter. It is called from one goroutine, at most once per NudgeEvery per
// entity, and must not block.
type Nudger interface {
	Nudge(e Entity, held HeldSummary)
}

// Nudgers tells each of its nudgers in turn.
type Nudgers []Nudger

// Nudge implements Nudger.
func (ns Nudgers) Nudge(e Entity, held HeldSummary) {
	for _, n := range ns {
		n.Nudge(e, held)
	}
}

// NudgerFunc is a function as a Nudger.
type NudgerFunc func(e Entity, held HeldSummary)

// Nudge implements Nudger.
func (f NudgerFunc) Nudge(e Entity, held HeldSummary) { f(e, held) }

// HeldSummary says what is held for an entity.
type HeldSummary struct {
	Total int         `json:"total"`
	From  []FromCount `json:"from,omitempty"`
	// InFlight counts messages handed to a call (of any of the entity's
	// sessions) whose client has not confirmed them yet: not in Total, and
	// held again if the confirmation does not come within the delivery lease.
	InFlight int `json:"inFlight,omitempty"`
	// MoreFrom counts the senders left out of From when a result bounds it
	// (the MCP layer lists at most 20); the core leaves it 0.
	MoreFrom int `json:"moreFrom,omitempty"`
}

// FromCount is how many held messages came from one sender.
type FromCount struct {
	From     string `json:"from"`
	FromName string `json:"fromName"`
	Count    int    `json:"count"`
}

// nudgeSet is the entities something was held for with no waiter, until
// the nudge loop tells their nudger. Its lock is a leaf.
type nudgeSet struct {
	mu   leafMutex
	gids map[string]bool
}

func (n *nudgeSet) want(gid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gids == nil {
		n.gids = map[string]bool{}
	}
	n.gids[gid] = true
}

func (n *nudgeSet) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.gids))
	for gid := range n.gids {
		out = append(out, gid)
	}
	return out
}

func (n *nudgeSet) done(gid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.gids, gid)
}

// nudgeDue tells the nudger of every entity something was held for with
// no waiter (run every NudgeEvery/4 by the core).
func (c *Core) nudgeDue() {
	now := c.cfg.Now()
	for _, gid := range c.nudges.list() {
		c.nudge(gid, now)
	}
}

// nudge tells gid's nudger what is held for it, at most once per NudgeEvery.
func (c *Core) nudge(gid string, now time.Time) {
	st := c.reg.get(gid)
	if st == nil {
		c.nudges.done(gid)
		return
	}
	st.mu.Lock()
	if st.removed {
		st.mu.Unlock()
		c.nudges.done(gid)
		return
	}
	if now.Sub(st.lastNudge) < c.cfg.NudgeEvery {
		st.mu.Unlock()
		return
	}
	c.nudges.done(gid)
	s := c.summary(st)
	if s.Total == 0 {
		st.mu.Unlock()
		return
	}
	st.nudged(now)
	e := st.snapshot()
	st.mu.Unlock()
	if c.cfg.Nudger != nil {
		c.cfg.Nudger.Nudge(e, s)
	}
}
