package herdr

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.Nudger = (*PaneNudger)(nil)

// PaneNudger reminds a primary that runs in a herdr pane that replies are
// held for it: one line typed into its pane when the agent is idle, at most
// one outstanding per pane, with a backoff that doubles while nothing is
// drained and resets when the held count goes down.
type PaneNudger struct {
	Client *Client
	Log    *slog.Logger
	// Backoff is the first gap between two reminders to one pane (default
	// 30s); it doubles up to MaxBackoff (default 10m).
	Backoff, MaxBackoff time.Duration
	// ReadyWait bounds the wait for the agent to be idle (default 60s).
	ReadyWait time.Duration
	// StillHeld reports what is held for gid right now (nil: trust the
	// summary the reminder was armed with). A reminder is typed only if
	// something is still held and nobody waits.
	StillHeld func(gid string) (held bridge.HeldSummary, waiting bool)

	ctx   context.Context
	wg    sync.WaitGroup
	mu    sync.Mutex
	panes map[string]*nudgeState
}

type nudgeState struct {
	outstanding bool
	next        time.Time
	backoff     time.Duration
	lastTotal   int
	rearmed     bool // a retry is scheduled for when the backoff ends
}

// Start sets the context the reminders run under; Wait waits for them.
func (n *PaneNudger) Start(ctx context.Context) {
	n.mu.Lock()
	n.ctx = ctx
	if n.Backoff <= 0 {
		n.Backoff = 30 * time.Second
	}
	if n.MaxBackoff <= 0 {
		n.MaxBackoff = 10 * time.Minute
	}
	if n.ReadyWait <= 0 {
		n.ReadyWait = 60 * time.Second
	}
	if n.Log == nil {
		n.Log = slog.New(slog.DiscardHandler)
	}
	n.panes = map[string]*nudgeState{}
	n.mu.Unlock()
}

// Wait waits for outstanding reminders after the Start context ended.
func (n *PaneNudger) Wait() { n.wg.Wait() }

// Reminder is the line typed for held.
func Reminder(held bridge.HeldSummary) string {
	var parts []string
	for _, f := range held.From {
		name := f.FromName
		if name == "" {
			name = f.From
		}
		parts = append(parts, fmt.Sprintf("%d from %s", f.Count, name))
	}
	return fmt.Sprintf("[herdbridge] %d message(s) held for you (%s): call bridge_poll to read them.", held.Total, strings.Join(parts, ", "))
}

// Nudge implements bridge.Nudger.
func (n *PaneNudger) Nudge(e bridge.Entity, held bridge.HeldSummary) {
	if e.PaneID == "" || !e.Role.Pulls() || held.Total == 0 {
		return
	}
	n.mu.Lock()
	if n.ctx == nil || n.ctx.Err() != nil {
		n.mu.Unlock()
		return
	}
	st := n.panes[e.PaneID]
	if st == nil {
		st = &nudgeState{backoff: n.Backoff}
		n.panes[e.PaneID] = st
	}
	now := time.Now()
	if held.Total < st.lastTotal { // it drained something: it is paying attention
		st.backoff, st.next = n.Backoff, time.Time{}
	}
	st.lastTotal = held.Total
	if st.outstanding || now.Before(st.next) {
		// remind again once the backoff ends (the core only calls on new
		// arrivals), unless a retry is already scheduled
		if !st.rearmed {
			st.rearmed = true
			wait := time.Until(st.next)
			if st.outstanding {
				wait = max(wait, time.Second)
			}
			ctx := n.ctx
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				n.mu.Lock()
				st.rearmed = false
				n.mu.Unlock()
				if n.StillHeld != nil {
					h, waiting := n.StillHeld(e.GID)
					if waiting || h.Total == 0 {
						return
					}
					held = h
				}
				n.Nudge(e, held)
			}()
		}
		n.mu.Unlock()
		return
	}
	st.outstanding = true
	st.next = now.Add(st.backoff)
	st.backoff = min(st.backoff*2, n.MaxBackoff)
	ctx := n.ctx
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		err := n.remind(ctx, e, held)
		if err != nil {
			n.Log.Info("pane reminder not typed", "pane", e.PaneID, bridge.LogGID, e.GID, "err", err)
		}
		n.mu.Lock()
		st.outstanding = false
		n.mu.Unlock()
		if n.StillHeld != nil && ctx.Err() == nil {
			n.Nudge(e, held) // inside the backoff now: re-arms the next look
		}
	}()
}

func (n *PaneNudger) remind(ctx context.Context, e bridge.Entity, held bridge.HeldSummary) error {
	pane := e.PaneID
	modern, err := n.Client.HasAgentPrompt(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(n.ReadyWait)
	for {
		var status string
		if modern {
			a, err := n.Client.AgentGet(ctx, pane)
			if err != nil {
				return err
			}
			status = a.AgentStatus
		} else {
			p, err := n.Client.PaneGet(ctx, pane)
			if err != nil {
				return err
			}
			status = p.AgentStatus
		}
		if Ready(status) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent not idle within %s (status %s)", n.ReadyWait, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	// the wait for idle can be long: is it still worth a reminder?
	if n.StillHeld != nil {
		h, waiting := n.StillHeld(e.GID)
		if waiting || h.Total == 0 {
			return nil
		}
		held = h
	}
	if r, err := n.Client.PaneRead(ctx, pane, SourceVisible, 0); err == nil {
		if d := ComposerDraft(r.Text); d != "" {
			return fmt.Errorf("the composer holds a draft (%q): not typing a reminder into it", clip(d, 30))
		}
	}
	line := Reminder(held)
	if modern {
		_, err = n.Client.AgentPrompt(ctx, pane, line)
		return err
	}
	return n.Client.PaneSendInput(ctx, pane, line, "enter")
}
