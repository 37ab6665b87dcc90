package herdr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.Injector = (*Injector)(nil)

// Injector is the forward path into herdr panes (SPEC §4): it types a brief
// into a worker's pane only when the agent is ready, never into a dialog,
// and reports the highest rung it actually observed — submitted (the turn
// started), uncertain (typed, turn start not seen even after one Enter
// retry) or failed (with the reason). One writer per pane at a time.
type Injector struct {
	Client *Client
	// BriefDir receives briefs larger than MaxInline; the prompt then names
	// the file. Required for large briefs.
	BriefDir string
	// MaxInline is the largest brief typed inline (default 8 KiB): very
	// long pastes are where agents misbehave.
	MaxInline int
	// ReadyWait bounds the wait for the agent to be idle/done (default 20s).
	ReadyWait time.Duration
	// VerifyWait bounds each look for the turn starting (default 3s).
	VerifyWait time.Duration
	// Poll is the status polling period (default 50ms).
	Poll time.Duration

	once  sync.Once
	mu    sync.Mutex
	panes map[string]chan struct{}
}

func (in *Injector) defaults() {
	if in.MaxInline <= 0 {
		in.MaxInline = 8 << 10
	}
	if in.ReadyWait <= 0 {
		in.ReadyWait = 20 * time.Second
	}
	if in.VerifyWait <= 0 {
		in.VerifyWait = 3 * time.Second
	}
	if in.Poll <= 0 {
		in.Poll = 50 * time.Millisecond
	}
}

// lockPane serializes writers of one pane; false if ctx ended first.
func (in *Injector) lockPane(ctx context.Context, pane string) (func(), bool) {
	in.mu.Lock()
	if in.panes == nil {
		in.panes = map[string]chan struct{}{}
	}
	ch := in.panes[pane]
	if ch == nil {
		ch = make(chan struct{}, 1)
		in.panes[pane] = ch
	}
	in.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	case <-ctx.Done():
		return nil, false
	}
}

func failed(format string, a ...any) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: fmt.Sprintf(format, a...)}
}

// Prompt is the text typed for b: a one-line header naming the sender and
// how to reply, then the sanitized brief — or, past MaxInline, the path of
// a file holding it.
func (in *Injector) Prompt(b bridge.Brief) (string, error) {
	in.once.Do(in.defaults)
	from := b.FromName
	if from == "" {
		from = b.Env.From
	}
	header := fmt.Sprintf("%s Brief from %s (reply with bridge_send target %q):\n", promptMark, from, from)
	if b.Env.Kind == bridge.KindBroadcast {
		header = fmt.Sprintf("%s Broadcast from %s:\n", promptMark, from)
	}
	body := Sanitize(string(b.Env.Body))
	if len(body) <= in.MaxInline {
		return header + body, nil
	}
	if in.BriefDir == "" {
		return "", fmt.Errorf("brief of %d bytes is over the %d-byte inline limit and no brief directory is set", len(body), in.MaxInline)
	}
	if err := os.MkdirAll(in.BriefDir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(in.BriefDir, b.Env.MsgID+".md")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", err
	}
	return header + fmt.Sprintf("The brief is %d bytes, so it is in the file %s: read it and act on it.", len(body), path), nil
}

// promptMark opens every prompt the injector types: how it recognises its
// own text still sitting in a composer.
const promptMark = "[herdbridge]"

// Inject implements bridge.Injector.
func (in *Injector) Inject(ctx context.Context, b bridge.Brief) bridge.InjectReceipt {
	in.once.Do(in.defaults)
	pane := b.To.PaneID
	unlock, ok := in.lockPane(ctx, pane)
	if !ok {
		return failed("another brief was still being typed into pane %s when the bound ran out", pane)
	}
	defer unlock()
	text, err := in.Prompt(b)
	if err != nil {
		return failed("cannot prepare the brief: %v", err)
	}
	proto, err := in.Client.Protocol(ctx)
	if err != nil {
		return failed("%v", err)
	}
	modern := proto >= 17
	if _, err := in.waitReady(ctx, pane, modern); err != nil {
		return failed("%v", err)
	}
	if draft := in.draft(ctx, pane); draft != "" {
		return failed("the composer of pane %s holds an unsent draft (%q): not typed, so the brief is not merged into it; clear it and resend", pane, clip(draft, 40))
	}
	// the baseline is taken right before typing; before protocol 20
	// agent.prompt does not refuse a blocked agent, so look once more
	before, err := in.state(ctx, pane, modern)
	if err != nil {
		return failed("pane %s: %v", pane, err)
	}
	if !Ready(before.status) {
		return failed("the agent in pane %s turned %s just before typing; nothing was typed", pane, before.status)
	}
	if b.Typing != nil {
		b.Typing()
	}
	custom := false
	if modern {
		_, err = in.Client.AgentPrompt(ctx, pane, text)
		if errors.Is(err, ErrAgentNotReady) { // a custom agent herdr does not drive: type and press Enter ourselves
			custom = true
			err = in.Client.PaneSendInput(ctx, pane, text, "enter")
		}
	} else {
		err = in.Client.PaneSendInput(ctx, pane, text, "enter")
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrAgentBlocked):
			return failed("the agent in pane %s turned blocked (a dialog) before the brief was typed; nothing was typed", pane)
		case errors.Is(err, ErrPaneNotFound), errors.Is(err, ErrAgentNotFound):
			return failed("pane %s closed before the brief was typed", pane)
		}
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: fmt.Sprintf("typing into pane %s failed midway (%v): it may or may not have reached the agent", pane, err)}
	}
	// herdr presses Enter 300 ms after agent.prompt's text: look for the
	// turn starting, then — only if the text still sits in the composer —
	// press Enter once more. Never re-paste.
	if in.turnStarted(ctx, pane, modern, before, 300*time.Millisecond+in.VerifyWait) {
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
	}
	if ctx.Err() != nil {
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed; the bound ran out before the turn start was seen"}
	}
	if !strings.Contains(in.draft(ctx, pane), promptMark) {
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed, and gone from the composer, but the agent was not seen starting the turn"}
	}
	if modern && !custom {
		err = in.Client.AgentSendKeys(ctx, pane, "enter")
	} else {
		err = in.Client.PaneSendKeys(ctx, pane, "enter")
	}
	if err == nil && in.turnStarted(ctx, pane, modern, before, in.VerifyWait) {
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted, Reason: "after one Enter retry"}
	}
	return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed, but the agent was not seen starting the turn, even after one Enter retry"}
}

// agentState is what the gate and the verification compare.
type agentState struct {
	status string
	seq    uint64
}

func (in *Injector) state(ctx context.Context, pane string, modern bool) (agentState, error) {
	if modern {
		a, err := in.Client.AgentGet(ctx, pane)
		if err != nil {
			return agentState{}, err
		}
		if a.LaunchPending {
			return agentState{status: "launch_pending", seq: a.StateChangeSeq}, nil
		}
		return agentState{status: a.AgentStatus, seq: a.StateChangeSeq}, nil
	}
	p, err := in.Client.PaneGet(ctx, pane)
	if err != nil {
		return agentState{}, err
	}
	return agentState{status: p.AgentStatus}, nil
}

// waitReady waits, bounded by ReadyWait, until the agent is idle or done.
// A blocked agent (a dialog) is waited on too, and never typed into.
func (in *Injector) waitReady(ctx context.Context, pane string, modern bool) (agentState, error) {
	deadline := time.Now().Add(in.ReadyWait)
	var last agentState
	for {
		st, err := in.state(ctx, pane, modern)
		switch {
		case errors.Is(err, ErrPaneNotFound):
			return st, fmt.Errorf("pane %s is gone", pane)
		case errors.Is(err, ErrAgentNotFound):
			return st, fmt.Errorf("no recognised agent runs in pane %s: the forward path types only into a recognised agent", pane)
		case err != nil:
			return st, err
		}
		if Ready(st.status) {
			return st, nil
		}
		last = st
		if time.Now().After(deadline) || ctx.Err() != nil {
			why := ""
			if last.status == StatusBlocked {
				why = " (a dialog waits for an answer in the pane)"
			}
			return st, fmt.Errorf("the agent in pane %s did not become ready within %s: stuck in status %s%s; nothing was typed", pane, in.ReadyWait, last.status, why)
		}
		if modern && last.status != "launch_pending" {
			// event-driven wait, bounded by what is left
			if left := time.Until(deadline); left > 0 {
				if _, err := in.Client.AgentWait(ctx, pane, []string{StatusIdle, StatusDone}, left); err == nil || errors.Is(err, ErrTimeout) {
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(in.Poll):
		}
	}
}

// turnStarted watches until the turn is seen starting: the status went
// working or blocked (a tool-permission dialog of the new turn), or the
// state_change_seq rose while our text is no longer in the composer (a
// turn that ended between two looks). A seq rise alone is not enough: a
// user merely looking at the pane changes done to idle. On protocol 17+
// it waits on herdr's event-driven agent.wait in short slices.
func (in *Injector) turnStarted(ctx context.Context, pane string, modern bool, before agentState, within time.Duration) bool {
	deadline := time.Now().Add(within)
	started := func(st agentState) bool {
		if st.status == StatusWorking || st.status == StatusBlocked {
			return true
		}
		return modern && st.seq > before.seq && !strings.Contains(in.draft(ctx, pane), promptMark)
	}
	for {
		st, err := in.state(ctx, pane, modern)
		if err == nil && started(st) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		if modern && err == nil {
			slice := min(left, 500*time.Millisecond)
			a, werr := in.Client.AgentWait(ctx, pane, []string{StatusWorking, StatusBlocked}, slice)
			if werr == nil && started(agentState{status: a.AgentStatus, seq: a.StateChangeSeq}) {
				return true
			}
			if werr == nil || errors.Is(werr, ErrTimeout) {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(in.Poll):
		}
	}
}

// draft reads what sits unsent in the agent's composer: the last prompt
// line of the screen ("> …", "❯ …", "│ > … │"). Empty when none is seen
// (or the screen cannot be read: herdr has no composer API, so this is a
// best-effort guard, not a guarantee).
func (in *Injector) draft(ctx context.Context, pane string) string {
	r, err := in.Client.PaneRead(ctx, pane, SourceVisible, 0)
	if err != nil {
		return ""
	}
	return ComposerDraft(r.Text)
}

// ComposerDraft finds the draft in a screen's last prompt line.
func ComposerDraft(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-6; i-- {
		l := strings.TrimSpace(lines[i])
		l = strings.TrimSpace(strings.Trim(l, "│|"))
		for _, p := range []string{"> ", "❯ ", ">", "❯"} {
			if rest, ok := strings.CutPrefix(l, p); ok {
				return strings.TrimSpace(rest)
			}
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
