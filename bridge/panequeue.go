package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// The pane queues (SPEC §10, "briefs never give up on a busy worker"). A
// brief or broadcast acked from a pane worker's inbox has no other copy,
// so it is appended to its pane's queue in the store, and one runner
// goroutine per pane with a queue types the briefs in order, each when the
// agent is ready (the Injector judges that), until each is typed, fails,
// or passes its expiresAt (FAILED to its sender). A brief that cannot be
// typed at once is reported queued to its sender (an INJECTED whose rung
// is StatusQueued); its receipt follows when it is typed. A runner is the
// only writer of its pane and of its queue's records; it is woken by the
// pane's herdr status (Core.PaneStatus), by a new brief, and every
// PaneRecheck, owned by the core's WaitGroup and stopped with its context,
// and restarted from the store at Start.

// paneQueues tracks which panes have a running runner. Its lock is a leaf.
type paneQueues struct {
	mu      leafMutex
	runners map[string]*paneRunner
	holds   map[string]time.Time // pane -> until when only next-lane briefs are typed (interrupt.go)

	lastTyped  map[string]string // pane -> msgId of the last brief typed there (panefiles.go)
	filesSwept time.Time         // when the large briefs' files were last swept
}

// hold makes pane's queue type only next-lane briefs (and settle a brief
// typing began on) until until, or until release.
func (q *paneQueues) hold(pane string, until time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.holds == nil {
		q.holds = map[string]time.Time{}
	}
	q.holds[pane] = until
}

// release ends pane's hold and makes its runner look again.
func (q *paneQueues) release(pane string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.holds, pane)
	if r := q.runners[pane]; r != nil {
		r.signal()
	}
}

// held reports whether pane's queue holds its normal lane back at now.
func (q *paneQueues) held(pane string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	until, ok := q.holds[pane]
	if ok && !now.Before(until) {
		delete(q.holds, pane)
		return false
	}
	return ok
}

type paneRunner struct {
	wake chan struct{} // capacity 1
	kick bool          // a brief was queued since the runner last looked
}

// start reports whether pane needs a new runner (and then counts it as
// running); otherwise the running one is told to look again.
func (q *paneQueues) start(pane string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.runners[pane]; r != nil {
		r.kick = true
		r.signal()
		return false
	}
	if q.runners == nil {
		q.runners = map[string]*paneRunner{}
	}
	q.runners[pane] = &paneRunner{wake: make(chan struct{}, 1)}
	return true
}

func (r *paneRunner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// wake makes pane's runner, if any, look again now.
func (q *paneQueues) wake(pane string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.runners[pane]; r != nil {
		r.signal()
	}
}

// look starts a runner's round: what was queued before it is in the store.
func (q *paneQueues) look(pane string) *paneRunner {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.runners[pane]
	r.kick = false
	return r
}

// done ends pane's runner when nothing was queued since its last look;
// false: look again.
func (q *paneQueues) done(pane string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.runners[pane].kick {
		return false
	}
	delete(q.runners, pane)
	return true
}

// enqueue appends a brief acked for the forward path to its pane's queue
// and makes sure the pane's runner runs.
func (c *Core) enqueue(e Entity, env *Envelope) {
	raw, err := json.Marshal(env)
	q := store.QueuedBrief{Pane: e.PaneID, To: e.GID, Env: raw, Next: env.Priority == PriorityNext}
	ahead := 0
	if err == nil {
		// a pane's queue is bounded like the inbox it drains: a worker that
		// never gets ready must not grow the state file without end
		ahead, err = c.queueBrief(env, &q)
	}
	if errors.Is(err, store.ErrGivenUp) {
		// its sender's gateway gave up on it and its sender was told FAILED
		// (giveup.go): the one fate is that, so it is never typed
		c.log.Warn("brief arrived after its sender gave up on it: not typed", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID)
		c.observeFor(HopExpire, e.GID, env, "given up by its sender before it arrived", 0)
		return
	}
	if err != nil {
		// acked, so this was its only copy: a loss, reported at once — as
		// every undelivered message is (fate.go), with its dead-letter
		// record, which the store keeps for later when it is what refused
		c.log.Warn("brief not queued for its pane", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, e.GID, "err", err)
		why := "its gateway could not queue it (" + err.Error() + ")"
		if errors.Is(err, store.ErrQueueFull) {
			why = fmt.Sprintf("%d briefs already wait for that pane (its agent is %s): it must take some before it can queue more", c.cfg.InboxMaxLength, c.paneStatusOf(e.GID))
		}
		u := undeliveredEnv(env, e.GID, "pane queue of "+e.PaneID, "not queued", "brief "+Excerpt(string(env.Body))+" not typed into "+e.Name+"'s pane: "+why)
		u.notifier = e.GID
		c.reportUndelivered([]undelivered{u})
		return
	}
	c.observeFor(HopQueue, e.GID, env, "queued behind "+strconv.Itoa(ahead), 0)
	if ahead > 0 && env.Kind == KindSend {
		// the runner may be busy typing the head for seconds: the sender
		// hears now that its brief waits, not after a bound
		c.publishAll([]outMsg{c.receiptFor(KindInjected, e.GID, env, c.queuedReason(queued{QueuedBrief: q, env: env},
			e.Name+" has "+strconv.Itoa(ahead)+" earlier brief(s) ahead of this one (its agent is "+c.paneStatusOf(e.GID)+")", ahead+1))})
	}
	c.runPane(e.PaneID)
}

// queueBrief appends q to its pane's queue; a SEND is claimed in the same
// transaction unless its sender's gateway gave it up first (giveup.go).
func (c *Core) queueBrief(env *Envelope, q *store.QueuedBrief) (ahead int, err error) {
	if env.Kind != KindSend {
		return c.st.PutQueued(q, waitsBehind, c.cfg.InboxMaxLength)
	}
	claim := store.Claim{MsgID: env.MsgID, Host: env.Host, Until: env.ExpiresAt.Add(c.cfg.ClockSkew)}
	return c.st.ClaimAndQueue(claim, q, waitsBehind, c.cfg.InboxMaxLength)
}

// runPane starts pane's runner unless it runs (then it looks again). After
// Close the queue stays in the store for the next Start.
func (c *Core) runPane(pane string) {
	if c.ctx.Err() != nil || c.cfg.Injector == nil || !c.queues.start(pane) {
		return
	}
	c.wg.Add(1)
	go c.paneRunner(pane)
}

// startQueues restarts the runner of every pane with queued briefs.
func (c *Core) startQueues() error {
	panes, err := c.st.QueuedPanes()
	if err != nil {
		return err
	}
	if len(panes) > 0 && c.cfg.Injector == nil {
		c.log.Warn("briefs are queued for panes but herdr is disabled: they wait until it is enabled", "panes", len(panes))
	}
	c.sweepBriefFiles() // a crash's leftovers, before any runner types
	for _, p := range panes {
		c.runPane(p)
	}
	return nil
}

// sweepPanes is the sweeper's part for the pane queues: the large briefs'
// files no brief needs any more, every expiryScanEvery.
func (c *Core) sweepPanes(now time.Time) {
	if c.queues.filesDue(now, c.expiryScanEvery()) {
		c.sweepBriefFiles()
	}
}

// expireQueued settles the briefs of pane's queue past their expiresAt.
func (c *Core) expireQueued(pane string) {
	qs, err := c.st.QueuedFor(pane)
	if err != nil {
		c.log.Warn("cannot read a pane's queue", "pane", pane, "err", err)
		return
	}
	c.dropExpired(qs)
}

// queued is a queue record with its envelope decoded.
type queued struct {
	store.QueuedBrief
	env *Envelope
}

func decodeQueued(q store.QueuedBrief) (queued, bool) {
	var env Envelope
	if json.Unmarshal(q.Env, &env) != nil || env.MsgID == "" {
		return queued{}, false
	}
	return queued{QueuedBrief: q, env: &env}, true
}

// dropExpired settles the briefs past their expiresAt (FAILED to the
// sender; one typed earlier was already reported) and returns the rest.
func (c *Core) dropExpired(qs []store.QueuedBrief) []store.QueuedBrief {
	now := c.cfg.Now()
	keep := qs[:0]
	for _, r := range qs {
		q, ok := decodeQueued(r)
		switch {
		case !ok:
			c.log.Warn("unreadable brief dropped from a pane's queue", "pane", r.Pane, "seq", r.Seq)
		case !q.env.Expired(now), c.mem.has(fateKey(q.To, q.env.MsgID)): // told: tryHead retries its delete
			keep = append(keep, r)
			continue
		case !q.Typed:
			c.observeFor(HopExpire, q.To, q.env, "expired in its pane's queue", 0)
			c.settleQueued(q, KindFailed, "brief "+Excerpt(string(q.env.Body))+" expired at "+q.env.ExpiresAt.UTC().Format(time.RFC3339)+
				" still queued for "+c.nameOf(q.To)+"'s pane ("+waitsText(q.Told)+"); send it again if it still matters")
			continue
		default: // typed and reported before: its composer text (if any) is own-draft recovery's no more
			c.discardBrief(q.env.MsgID)
		}
		c.dequeue(r)
	}
	return keep
}

func waitsText(told string) string {
	switch told {
	case "":
		return "never typed"
	case waitsBehind:
		return "waiting behind earlier briefs"
	case WaitsDraft:
		return "a draft someone typed sat in its composer"
	case WaitsOwnDraft:
		return "its composer held an earlier brief that was never submitted"
	}
	return "the worker stayed " + told
}

// waitsBehind is QueuedBrief.Told for a brief told it waits behind others.
const waitsBehind = "behind"

// settleQueued takes q out of its queue, telling its sender (a SEND's)
// kind with reason.
func (c *Core) settleQueued(q queued, kind Kind, reason string) {
	switch {
	case kind == KindFailed: // not typed: a fate like any undelivered message's (fate.go)
		u := undeliveredEnv(q.env, q.To, "pane queue of "+q.Pane, "not typed", reason)
		u.notifier = q.To
		c.reportUndelivered([]undelivered{u})
	case q.env.Kind == KindSend:
		c.publishAll([]outMsg{c.receiptFor(kind, q.To, q.env, reason)})
	}
	if kind != KindInjected { // not typed: nobody reads its file
		c.discardBrief(q.env.MsgID)
	}
	c.settledHead(q)
}

// settledHead takes q, whose sender is being told its fate, out of its
// pane's queue — and first marks that fate in memory (fateKey), because
// the store may refuse the delete (a full disk): the head then stays in
// the queue, and without the mark the runner would type it and tell its
// sender again, round after round (issue 20: one FAILED, dozens of times).
// With it, tryHead only retries the delete (dequeueTold).
func (c *Core) settledHead(q queued) {
	c.mem.mark(fateKey(q.To, q.env.MsgID), c.cfg.Now().Add(c.cfg.MessageTTL))
	c.dequeue(q.QueuedBrief)
}

// failQueued settles q FAILED as settleQueued does, but leaves it in its
// queue when its FAILED could not be published (a kill or a cut took the
// link; fate.go), and says so (false): the runner tries it again at its
// next recheck, or the next start does.
func (c *Core) failQueued(q queued, reason string) bool {
	u := undeliveredEnv(q.env, q.To, "pane queue of "+q.Pane, "not typed", reason)
	u.notifier = q.To
	if _, unsent := c.reportOrKeep([]undelivered{u}); len(unsent) > 0 {
		return false
	}
	c.discardBrief(q.env.MsgID)
	c.settledHead(q)
	return true
}

// dequeueTold retries taking r, a head whose fate its sender was told,
// out of its pane's queue; false while the store refuses (the runner
// waits for its next round instead of spinning).
func (c *Core) dequeueTold(r store.QueuedBrief) bool {
	if err := c.st.DeleteQueued(r); err != nil {
		c.log.Warn("cannot take a settled brief out of its pane's queue: it is not typed again", "pane", r.Pane, "seq", r.Seq, "err", err)
		return false
	}
	return true
}

func (c *Core) dequeue(r store.QueuedBrief) {
	if err := c.st.DeleteQueued(r); err != nil {
		c.log.Warn("cannot take a brief out of its pane's queue", "pane", r.Pane, "seq", r.Seq, "err", err)
	}
}

// tellQueued sends q's sender an INJECTED with rung queued, and records
// what it was told.
func (c *Core) tellQueued(q queued, waits, why string, place int) {
	c.publishAll([]outMsg{c.receiptFor(KindInjected, q.To, q.env, c.queuedReason(q, why, place))})
	q.Told = waits
	if err := c.st.UpdateQueued(q.QueuedBrief); err != nil {
		c.log.Warn("cannot record that a queued brief's sender was told", LogMsgID, q.env.MsgID, LogTraceID, q.env.TraceID, "err", err)
	}
}

// queuedReason is the body of the INJECTED telling q's sender it is
// queued: why, its place, and what comes next.
func (c *Core) queuedReason(q queued, why string, place int) string {
	return StatusQueued + ": " + why + "; place " + strconv.Itoa(place) + " in the queue of " + c.nameOf(q.To) + "'s pane. It is typed once the pane is ready; " +
		"its receipt will be held for you (FAILED if still queued at " + q.env.ExpiresAt.UTC().Format(time.RFC3339) + ")"
}

// paneStatusOf is the live herdr status of gid's pane, for what the
// sender is told.
func (c *Core) paneStatusOf(gid string) string {
	st := c.reg.get(gid)
	if st == nil {
		return "gone"
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.paneStatus == "" {
		return "busy"
	}
	return st.paneStatus
}

// workerOf is q's worker while it still lives in q's pane.
func (c *Core) workerOf(q queued) (Entity, bool) {
	st := c.reg.get(q.To)
	if st == nil {
		return Entity{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.snapshot(), !st.removed && st.PaneID == q.Pane
}
