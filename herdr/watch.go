package herdr

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"time"
)

// Watcher follows the herdr panes of local entities: their live agent
// status, and their closing. It subscribes to pane.closed, pane.exited and
// each pane's pane.agent_status_changed, and reconciles against a pane.list
// snapshot taken after every (re)subscription: herdr replays up to 512 old
// topology events to a new subscriber, and pane ids are never reused, so a
// close event counts only for a pane the snapshot showed alive, and is
// confirmed with pane.get before anything is removed.
type Watcher struct {
	Client *Client
	Log    *slog.Logger
	// Panes lists the panes to follow (called on every resync).
	Panes func() []string
	// OnStatus is told a pane's agent status. Must not block.
	OnStatus func(pane, status string)
	// OnClosed is told a followed pane is gone (confirmed).
	OnClosed func(pane string)
	// Resync is how often the pane set and a snapshot are checked (default 2s).
	Resync time.Duration
}

// Run follows panes until ctx ends, reconnecting with backoff while herdr
// is down (logged once per outage).
func (w *Watcher) Run(ctx context.Context) {
	if w.Resync <= 0 {
		w.Resync = 2 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	backoff := 500 * time.Millisecond
	down := false
	for ctx.Err() == nil {
		err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if IsNotRunning(err) {
			if !down {
				w.Log.Warn("herdr is not running: pane status and closing are not followed until it is", "err", err)
				down = true
			}
		} else if err != nil {
			w.Log.Warn("herdr event stream ended; resubscribing", "err", err)
		}
		if err == nil {
			backoff = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
		if err == nil {
			down = false
		}
	}
}

// session is one subscription: it ends when the stream breaks, or the set
// of panes changed and a new subscription is needed (nil).
func (w *Watcher) session(ctx context.Context) error {
	panes := w.panes()
	subs := []map[string]any{{"type": "pane.closed"}, {"type": "pane.exited"}}
	for _, p := range panes {
		subs = append(subs, map[string]any{"type": "pane.agent_status_changed", "pane_id": p})
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := w.Client.Subscribe(sctx, subs)
	if err != nil {
		if errors.Is(err, ErrPaneNotFound) { // a followed pane vanished before we subscribed
			w.reconcile(ctx, panes)
			return nil
		}
		return err
	}
	alive := w.reconcile(ctx, panes)
	tick := time.NewTicker(w.Resync)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				return sub.Err()
			}
			switch ev.Name {
			case "pane_closed", "pane_exited":
				if alive[ev.PaneID] { // replayed history names panes already gone: skip those
					if w.confirmGone(ctx, ev.PaneID) {
						delete(alive, ev.PaneID)
						w.OnClosed(ev.PaneID)
					}
				}
			case "pane.agent_status_changed":
				if ev.AgentStatus != "" && alive[ev.PaneID] {
					w.OnStatus(ev.PaneID, ev.AgentStatus)
				}
			}
		case <-tick.C:
			if now := w.panes(); !slices.Equal(now, panes) {
				return nil // resubscribe for the new set
			}
			alive = w.reconcile(ctx, panes)
		case <-ctx.Done():
			return nil
		}
	}
}

func (w *Watcher) panes() []string {
	p := append([]string(nil), w.Panes()...)
	sort.Strings(p)
	return slices.Compact(p)
}

// reconcile snapshots the panes: statuses for the living, OnClosed for the
// followed ones that are confirmed gone. Returns the living followed panes.
func (w *Watcher) reconcile(ctx context.Context, panes []string) map[string]bool {
	alive := map[string]bool{}
	list, err := w.Client.PaneList(ctx)
	if err != nil {
		w.Log.Debug("pane snapshot failed", "err", err)
		for _, p := range panes {
			alive[p] = true // unknown: keep following
		}
		return alive
	}
	byID := map[string]PaneInfo{}
	for _, p := range list {
		byID[p.PaneID] = p
	}
	for _, p := range panes {
		if info, ok := byID[p]; ok {
			alive[p] = true
			w.OnStatus(p, info.AgentStatus)
			continue
		}
		if w.confirmGone(ctx, p) {
			w.OnClosed(p)
		} else {
			alive[p] = true // an alias (moved pane) still resolves
		}
	}
	return alive
}

func (w *Watcher) confirmGone(ctx context.Context, pane string) bool {
	_, err := w.Client.PaneGet(ctx, pane)
	return errors.Is(err, ErrPaneNotFound)
}
