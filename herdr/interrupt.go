package herdr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.Interrupter = (*Injector)(nil)

// Interrupt implements bridge.Interrupter: under the pane's writer lock (a
// brief being typed finishes first, and none is typed until the interrupt
// is judged), it reads the agent's status; if the agent is working or
// waits on a dialog it presses Escape once — agent.send_keys where herdr
// drives the agent, else pane.send_keys — and watches for the status to
// turn idle or done. Only that change is reported interrupted; no change
// within the bound is uncertain. An agent not working gets no key.
func (in *Injector) Interrupt(ctx context.Context, e bridge.Entity) bridge.InterruptReceipt {
	in.once.Do(in.defaults)
	pane := e.PaneID
	unlock, ok := in.lockPane(ctx, pane)
	if !ok {
		return interruptFailed("another writer kept pane %s busy until the bound ran out; nothing was pressed", pane)
	}
	defer unlock()
	proto, err := in.Client.Protocol(ctx)
	if err != nil {
		return interruptFailed("herdr cannot be asked about pane %s (%v); nothing was pressed", pane, err)
	}
	modern := proto >= 17
	before, err := in.state(ctx, pane, modern)
	switch {
	case errors.Is(err, ErrPaneNotFound):
		return interruptFailed("pane %s of %s is gone", pane, e.Name)
	case errors.Is(err, ErrAgentNotFound):
		if _, perr := in.Client.PaneGet(ctx, pane); errors.Is(perr, ErrPaneNotFound) {
			return interruptFailed("pane %s of %s is gone", pane, e.Name)
		}
		return interruptFailed("no recognised agent runs in pane %s; nothing was pressed", pane)
	case err != nil:
		return interruptFailed("herdr cannot be asked about pane %s (%v); nothing was pressed", pane, err)
	case before.status != StatusWorking && before.status != StatusBlocked:
		return bridge.InterruptReceipt{Status: bridge.StatusNotWorking, Reason: fmt.Sprintf("%s was %s, not working: no key was pressed", e.Name, before.status)}
	}
	if err := in.pressEscape(ctx, pane, modern); err != nil {
		var answered *Error
		if errors.As(err, &answered) {
			return interruptFailed("herdr refused the Escape for pane %s (%v): nothing was pressed", pane, err)
		}
		return bridge.InterruptReceipt{Status: bridge.StatusUncertain, Reason: fmt.Sprintf("sending Escape to pane %s failed midway (%v): it may or may not have been pressed", pane, err)}
	}
	if after, ok := in.turnEnded(ctx, pane, modern); ok {
		return bridge.InterruptReceipt{Status: bridge.StatusInterrupted, Reason: fmt.Sprintf("Escape pressed once; %s went from %s to %s", e.Name, before.status, after)}
	}
	return bridge.InterruptReceipt{Status: bridge.StatusUncertain, Reason: fmt.Sprintf("Escape pressed once, but %s was not seen leaving %s within the bound", e.Name, before.status)}
}

func interruptFailed(format string, a ...any) bridge.InterruptReceipt {
	return bridge.InterruptReceipt{Status: bridge.StatusFailed, Reason: fmt.Sprintf(format, a...)}
}

// pressEscape presses Escape once, as pressEnter presses Enter.
func (in *Injector) pressEscape(ctx context.Context, pane string, modern bool) error {
	if modern {
		err := in.Client.AgentSendKeys(ctx, pane, "escape")
		if !errors.Is(err, ErrAgentNotReady) {
			return err
		}
	}
	return in.Client.PaneSendKeys(ctx, pane, "escape")
}

// turnEnded watches, for at most InterruptWait (bounded by ctx), for the
// agent's status to turn idle or done, and returns it.
func (in *Injector) turnEnded(ctx context.Context, pane string, modern bool) (string, bool) {
	deadline := time.Now().Add(in.InterruptWait)
	for {
		st, err := in.state(ctx, pane, modern)
		if err == nil && Ready(st.status) {
			return st.status, true
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return "", false
		}
		if modern && err == nil {
			a, werr := in.Client.AgentWait(ctx, pane, []string{StatusIdle, StatusDone}, min(left, 500*time.Millisecond))
			if werr == nil && Ready(a.AgentStatus) {
				return a.AgentStatus, true
			}
			if werr == nil || errors.Is(werr, ErrTimeout) {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(in.Poll):
		}
	}
}
