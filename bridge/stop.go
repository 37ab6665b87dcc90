package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Stop: bridge_stop ends a worker. Its pane is closed first (by default
// for a worker bridge_spawn started), then the entity is removed: its open
// turns become ABANDONED for their counterparts, the brief it worked on is
// ABANDONED for its sender, what it held is reported FAILED to each
// sender, its pane's queued briefs are reported FAILED by the pane's
// runner, and its inbox is deleted. A worker on another host is stopped by
// its own gateway, through a signed STOP on control.<host> (remote_stop.go).
//
// Closing before removing is what makes a crash in between harmless: the
// pane is gone, so the restarted gateway's pane watcher removes the entity
// (and a retried stop closes nothing twice: a pane already gone counts as
// closed). The other order could leave an agent running in a pane no
// entity names, which no retry could reach.

// StopRequest is bridge_stop.
type StopRequest struct {
	Target string
	Reason string // told to the counterparts, in the ABANDONED and FAILED notices
	// ClosePane closes the worker's herdr pane (ending its agent); nil:
	// closed if bridge_spawn started the worker.
	ClosePane *bool
	// StopID makes a retried stop idempotent: a UUID; default a new one.
	StopID string
}

// MaxStopReasonBytes bounds a stop's reason.
const MaxStopReasonBytes = 1024

// StatusStopped is bridge_stop's result: the worker is gone.
const StatusStopped = "stopped"

// stopMemory is how long a stop id is remembered.
const stopMemory = 24 * time.Hour

// normalized fills in a new stop id and refuses one that is not a UUID or
// a reason that is not text.
func (req StopRequest) normalized() (StopRequest, error) {
	if req.StopID == "" {
		req.StopID = uuid.NewString()
	} else if _, err := uuid.Parse(req.StopID); err != nil {
		return req, userErr("stop_id %s is not a UUID", Clip(req.StopID))
	}
	if len(req.Reason) > MaxStopReasonBytes {
		return req, userErr("reason is %d bytes, over the %d-byte limit: say it in a sentence", len(req.Reason), MaxStopReasonBytes)
	}
	if req.Reason == "" {
		return req, nil
	}
	return req, checkText("reason", req.Reason)
}

// mayControl says whether caller may stop or interrupt target: a primary
// or orchestrator may act on any worker, a worker only on itself, and no
// one on a primary or orchestrator (`herdbridge remove` removes those).
func mayControl(what string, caller, target Entity) error {
	switch {
	case target.Role != RoleWorker:
		return userErr("%s is a %s: %s acts on workers only (an operator removes other entities with `herdbridge remove`)", target.Addr(), target.Role, what)
	case caller.Role == RoleWorker && caller.GID != target.GID:
		return userErr("refused: %s is a worker, and a worker may %s only itself, not %s; ask your primary to do it", caller.Addr(), stopVerb(what), target.Addr())
	}
	return nil
}

func stopVerb(what string) string {
	if what == "bridge_interrupt" {
		return "interrupt"
	}
	return "stop"
}

// Stop is bridge_stop for the entity caller.
func (c *Core) Stop(ctx context.Context, caller string, req StopRequest) (*Result, error) {
	st, err := c.caller(caller)
	if err != nil {
		return nil, err
	}
	if req, err = req.normalized(); err != nil {
		return nil, err
	}
	if c.mem.has(stopKey(req.StopID)) {
		return stoppedBefore(req), nil
	}
	target, err := c.Resolve(req.Target)
	if err != nil {
		return nil, err
	}
	by := st.view()
	if err := mayControl("bridge_stop", by, target); err != nil {
		return nil, err
	}
	if target.Host != c.cfg.Host {
		return c.stopRemote(ctx, st, target, req)
	}
	return c.stopLocal(ctx, by.Addr(), target.GID, req)
}

func stopKey(id string) string { return "stop:" + id }

// stoppedBefore is the result of a stop whose stop id was used by a stop
// that finished.
func stoppedBefore(req StopRequest) *Result {
	return &Result{Status: StatusStopped, Target: req.Target, Deduped: true,
		Reason: "already stopped by an earlier call with stop_id " + req.StopID + ": nothing was done again"}
}

// stopLocal stops the local worker gid for by (name@host of the caller).
// One stop of a worker runs at a time; a stop id that finished is
// answered from memory.
func (c *Core) stopLocal(ctx context.Context, by, gid string, req StopRequest) (*Result, error) {
	release, err := c.spawns.claim(ctx, "stop:"+gid, "stopId:"+req.StopID)
	if err != nil {
		return nil, err
	}
	defer release()
	if c.mem.has(stopKey(req.StopID)) {
		return stoppedBefore(req), nil
	}
	st := c.reg.get(gid)
	if st == nil {
		return nil, userErr("no worker %s on %s: it was stopped or removed already (bridge_roster lists who is here)", Clip(req.Target), c.cfg.Host)
	}
	e := st.view()
	why := e.Name + " was stopped by " + by
	// the reason is sender-written: it goes to the counterparts inside
	// their notices (quoted as data), never back into a result's reason
	res := &Result{Status: StatusStopped, Target: e.Addr(), Reason: why}
	if req.Reason != "" {
		why += " (" + req.Reason + ")"
		res.Reason += " (the reason given is passed on to whoever waited on it)"
	}
	closePane := e.Spawned
	if req.ClosePane != nil {
		closePane = *req.ClosePane
	}
	st.mu.Lock()
	st.setGoneWhy(why) // whoever removes it now (this stop, or the pane watcher seeing the pane close) says why
	st.mu.Unlock()
	if closePane && e.PaneID != "" {
		note, err := c.closeWorkerPane(ctx, e, req.StopID)
		if err != nil {
			st.mu.Lock()
			st.setGoneWhy("")
			st.mu.Unlock()
			return nil, err
		}
		res.Reason += "; " + note
	} else if e.PaneID != "" {
		res.Reason += "; its pane " + e.PaneID + " was left open (close_pane false): its agent keeps running outside the bridge"
	}
	told, err := c.retire(ctx, st, why)
	if err != nil {
		return nil, err
	}
	if told > 0 {
		res.Reason += fmt.Sprintf("; %d held message(s) reported FAILED to their senders", told)
	}
	c.mem.mark(stopKey(req.StopID), c.cfg.Now().Add(stopMemory))
	c.log.Info("worker stopped", LogGID, gid, "name", e.Name, "by", by, "paneClosed", closePane && e.PaneID != "")
	return res, nil
}

// closeWorkerPane closes e's pane; a pane already gone counts as closed.
func (c *Core) closeWorkerPane(ctx context.Context, e Entity, stopID string) (string, error) {
	if c.cfg.Panes == nil {
		return "", userErr("%s lives in pane %s, but this gateway has no herdr connection to close it: stop it with close_pane=false (its agent keeps running), or enable herdr", e.Addr(), e.PaneID)
	}
	err := c.cfg.Panes.ClosePane(ctx, e.PaneID)
	switch {
	case err == nil:
		return "its pane " + e.PaneID + " was closed", nil
	case errors.Is(err, ErrPaneGone):
		return "its pane " + e.PaneID + " was already gone", nil
	}
	return "", userErr("herdr could not close pane %s of %s (%v): nothing was removed; call bridge_stop again with stop_id %s, or with close_pane=false to remove the worker and leave its pane", e.PaneID, e.Addr(), err, stopID)
}

// ErrPaneGone is what a PaneStarter's ClosePane wraps when the pane does
// not exist (closed already).
var ErrPaneGone = errors.New("bridge: pane is gone")

// retire removes st for good, as a stop does (removal.go): what it held is
// reported FAILED to each sender with why (how many were told is returned),
// its turns become ABANDONED, and its inbox is closed, emptied and deleted.
func (c *Core) retire(ctx context.Context, st *entState, why string) (int, error) {
	told, _, err := c.removeEntity(ctx, st, "stopped", func(*entState) (string, bool) { return why, true })
	if err != nil {
		return told, fmt.Errorf("bridge: remove %s: %w", st.Name, err)
	}
	return told, nil
}
