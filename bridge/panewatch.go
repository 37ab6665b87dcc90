package bridge

import "context"

// What herdr's pane watcher tells the core about the panes of local
// entities (herdr/watch.go, wired in gateway/gateway.go): a pane's live status, which
// also wakes its queue (panequeue.go), the list of panes to watch, and a
// pane that closed, whose entities are removed (removal.go).

// PaneStatus records the live herdr status of the entity in pane (shown by
// the roster), and wakes the pane's queue: its agent may be ready now.
func (c *Core) PaneStatus(pane, status string) {
	for _, st := range c.reg.all() {
		st.mu.Lock()
		if st.PaneID == pane {
			st.setPaneStatus(status)
		}
		st.mu.Unlock()
	}
	c.queues.wake(pane)
}

// Panes lists the herdr panes of local entities.
func (c *Core) Panes() []string {
	var out []string
	for _, st := range c.reg.all() {
		st.mu.Lock()
		if st.PaneID != "" {
			out = append(out, st.PaneID)
		}
		st.mu.Unlock()
	}
	return out
}

// PaneClosed removes the entities that lived in a closed pane: what was
// pending on them becomes ABANDONED for their counterparts, and their
// inboxes go.
func (c *Core) PaneClosed(ctx context.Context, pane string) {
	var gids []string
	for _, st := range c.reg.all() {
		st.mu.Lock()
		if st.PaneID == pane {
			gids = append(gids, st.GID)
		}
		st.mu.Unlock()
	}
	for _, gid := range gids {
		err := c.removeBecause(ctx, gid, "pane closed", func(st *entState) string {
			if st.goneWhy != "" { // a stop closed it
				return st.goneWhy
			}
			return st.Name + " went away (its pane " + pane + " closed)"
		})
		if err != nil {
			c.log.Warn("removing the entity of a closed pane failed", LogGID, gid, "pane", pane, "err", err)
			continue
		}
		c.log.Info("pane closed: entity removed", LogGID, gid, "pane", pane)
	}
	c.queues.wake(pane) // its queued briefs fail now, not at the next recheck
}
