package bridge

import (
	"encoding/json"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Large briefs' files. An Injector may keep a brief too long to type inline
// in a file its prompt names (herdr: <state-dir>/briefs/<msgId>.md). A file
// is needed while its brief is queued (typed or not), and while it is the
// last brief typed into its pane: the agent reads the file during that
// turn. Otherwise it is deleted:
//
//   - at once when its brief leaves the queue untyped (failed, expired, its
//     worker gone or its pane closed) or is given up by own-draft recovery;
//   - when the next brief is typed into the same pane (the agent was ready
//     again, so it is done with the turn the file was for);
//   - by the sweep (every expiryScanEvery, and at Start for a crash's
//     leftovers): every file no queued brief, no brief awaiting its
//     receipt, and no live worker's last typed brief refers to. A restart
//     forgets which brief was typed last, so it keeps only the files of
//     queued and awaited briefs.

// BriefFiles is implemented by an Injector that keeps large briefs in
// files; the core decides when one is no longer needed.
type BriefFiles interface {
	// DiscardBrief deletes what was kept for the brief msgID; nothing kept
	// is no error.
	DiscardBrief(msgID string) error
	// KeptBriefs lists the msgIds of the briefs something is kept for.
	KeptBriefs() ([]string, error)
}

// discardBrief deletes the file of the brief msgID, if the Injector keeps
// one.
func (c *Core) discardBrief(msgID string) {
	bf, ok := c.cfg.Injector.(BriefFiles)
	if !ok {
		return
	}
	if err := bf.DiscardBrief(msgID); err != nil {
		c.log.Warn("cannot delete a large brief's file", LogMsgID, msgID, "err", err)
	}
}

// typedInto records msgID as the last brief typed into pane (the agent may
// read its file during its turn) and deletes the file of the one before.
func (c *Core) typedInto(pane, msgID string) {
	if prev := c.queues.typed(pane, msgID); prev != "" && prev != msgID {
		c.discardBrief(prev)
	}
}

// typed records msgID as pane's last typed brief and returns the one it
// replaces.
func (q *paneQueues) typed(pane, msgID string) (prev string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lastTyped == nil {
		q.lastTyped = map[string]string{}
	}
	prev = q.lastTyped[pane]
	q.lastTyped[pane] = msgID
	return prev
}

// lastTypedIn lists the last typed brief of each pane in live, and forgets
// the panes not in it (closed, or their worker removed).
func (q *paneQueues) lastTypedIn(live map[string]bool) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for pane, id := range q.lastTyped {
		if !live[pane] {
			delete(q.lastTyped, pane)
			continue
		}
		out = append(out, id)
	}
	return out
}

// filesDue reports whether the brief files are to be swept at now, and if
// so counts it as done.
func (q *paneQueues) filesDue(now time.Time, every time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.filesSwept) < every {
		return false
	}
	q.filesSwept = now
	return true
}

// sweepBriefFiles deletes the files no brief needs any more (called by the
// sweeper, and at Start).
func (c *Core) sweepBriefFiles() {
	bf, ok := c.cfg.Injector.(BriefFiles)
	if !ok {
		return
	}
	// listed before the references are read: a file written meanwhile is
	// its brief's while it is queued, and typedInto records it before it
	// leaves the queue, so it is referred to below
	kept, err := bf.KeptBriefs()
	if err != nil {
		c.log.Warn("cannot list the large briefs' files", "err", err)
		return
	}
	if len(kept) == 0 {
		return
	}
	needed, err := c.briefsNeeded()
	if err != nil {
		c.log.Warn("cannot tell which large briefs' files are still needed: none deleted", "err", err)
		return
	}
	for _, id := range kept {
		if !needed[id] {
			c.discardBrief(id)
		}
	}
}

// briefsNeeded is the msgIds whose files must stay: the queued briefs, the
// briefs awaiting their receipt, and each live worker pane's last typed
// brief.
func (c *Core) briefsNeeded() (map[string]bool, error) {
	needed := map[string]bool{}
	err := c.st.WalkQueued(func(q store.QueuedBrief) {
		var id struct{ MsgID string } // only the id is kept
		if json.Unmarshal(q.Env, &id) == nil && id.MsgID != "" {
			needed[id.MsgID] = true
		}
	})
	if err != nil {
		return nil, err
	}
	for _, id := range c.ledger.ids() {
		needed[id] = true
	}
	for _, id := range c.queues.lastTypedIn(c.workerPanes()) {
		needed[id] = true
	}
	return needed, nil
}

// workerPanes is the set of panes a live worker of this gateway types into.
func (c *Core) workerPanes() map[string]bool {
	live := map[string]bool{}
	for _, st := range c.reg.all() {
		st.mu.Lock()
		if !st.removed && c.forwards(st) {
			live[st.PaneID] = true
		}
		st.mu.Unlock()
	}
	return live
}
