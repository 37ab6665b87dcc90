package herdr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge"
)

// ready looks once at e's pane and returns the baseline the verification
// compares against, or the receipt that ends the attempt: not ready (the
// agent busy, a dialog, with checkDraft a draft in the composer) or failed
// (the pane or its agent gone, herdr down). The baseline is taken right
// before typing; before protocol 20 agent.prompt does not refuse a blocked
// agent, so the status is read again after the composer.
func (in *Injector) ready(ctx context.Context, e bridge.Entity, modern, checkDraft bool) (agentState, *bridge.InjectReceipt) {
	pane := e.PaneID
	look := func() (agentState, *bridge.InjectReceipt) {
		st, err := in.state(ctx, pane, modern)
		switch {
		case errors.Is(err, ErrPaneNotFound):
			return st, ptr(failed("pane %s is gone", pane))
		case errors.Is(err, ErrAgentNotFound):
			return st, ptr(failed("no recognised agent runs in pane %s: the forward path types only into a recognised agent", pane))
		case err != nil:
			return st, ptr(unreachable(e, err))
		case !Ready(st.status):
			return st, ptr(notReady(e, st.status))
		}
		return st, nil
	}
	if _, wait := look(); wait != nil {
		return agentState{}, wait
	}
	if draft := in.draft(ctx, pane); checkDraft && strings.HasPrefix(draft, promptMark) {
		return agentState{}, &bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: bridge.WaitsOwnDraft,
			Reason: fmt.Sprintf("the composer of %s's pane %s holds an earlier brief herdbridge typed that was never submitted (%s): the brief is not typed over it (the two would be submitted as one)", e.Name, pane, draftSize(draft))}
	} else if checkDraft && draft != "" {
		return agentState{}, &bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: bridge.WaitsDraft,
			Reason: fmt.Sprintf("the composer of %s's pane %s holds an unsent draft (%s) that is not from herdbridge: the brief is not typed over it (it would be merged) and waits until the draft is sent or cleared", e.Name, pane, draftSize(draft))}
	}
	return look()
}

func ptr(r bridge.InjectReceipt) *bridge.InjectReceipt { return &r }

// draftSize is a composer draft as a reason names it: its size, never its
// words. The reason reaches the sender's model as herdbridge's sentence,
// and the draft is text a person (or another sender's brief) put there:
// quoted, it would be someone else's words inside ours.
func draftSize(draft string) string {
	return fmt.Sprintf("%d characters", utf8.RuneCountInString(draft))
}

// WaitsHerdr is InjectReceipt.Waits for a pane whose herdr cannot be asked
// right now (not running, restarting, too slow to answer).
const WaitsHerdr = "herdr"

// unreachable judges an error asking herdr about e's pane: herdr not
// answering at all (not running, restarting, timing out) keeps the brief
// queued — a herdr restart must not fail every queued brief — while an
// error herdr answered fails it.
func unreachable(e bridge.Entity, err error) bridge.InjectReceipt {
	var answered *Error
	if errors.As(err, &answered) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrServerUnavailable) {
		return failed("%v", err)
	}
	return bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: WaitsHerdr,
		Reason: fmt.Sprintf("herdr cannot be asked about %s's pane %s right now (%v); the brief waits in the pane's queue", e.Name, e.PaneID, err)}
}

// notReady says, for the sender, what the agent in e's pane is doing.
func notReady(e bridge.Entity, status string) bridge.InjectReceipt {
	var why string
	switch status {
	case StatusBlocked:
		why = fmt.Sprintf("%s waits on a dialog in pane %s (status blocked): the brief is typed once the dialog is answered", e.Name, e.PaneID)
	case "launch_pending":
		why = fmt.Sprintf("%s is still starting in pane %s", e.Name, e.PaneID)
	case StatusUnknown:
		why = fmt.Sprintf("herdr cannot tell what the agent in %s's pane %s is doing (status unknown)", e.Name, e.PaneID)
	default:
		why = fmt.Sprintf("%s is %s in pane %s", e.Name, status, e.PaneID)
	}
	return bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: status, Reason: why}
}

// draft reads what sits unsent in the agent's composer. Empty when none is
// seen (or the screen cannot be read: herdr has no composer API, so this
// is a best-effort guard, not a guarantee).
func (in *Injector) draft(ctx context.Context, pane string) string {
	r, err := in.Client.PaneRead(ctx, pane, SourceVisible, 0)
	if err != nil {
		return ""
	}
	return ComposerDraft(r.Text)
}

// ComposerDraft finds the draft in a screen: the last prompt line ("> …",
// "❯ …", "│ > … │") near the bottom, and the indented lines under it (a
// multi-line draft), joined by newlines.
func ComposerDraft(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-composerRows; i-- {
		first, ok := promptLine(lines[i])
		if !ok {
			continue
		}
		out := []string{first}
		for _, l := range lines[i+1:] {
			l = strings.TrimRight(strings.TrimLeft(l, "│|"), "│| ")
			if l == "" || !unicode.IsSpace([]rune(l)[0]) {
				break // the composer ends where unindented text (or its box) starts
			}
			out = append(out, strings.TrimSpace(l))
		}
		return strings.TrimSpace(strings.Join(out, "\n"))
	}
	return ""
}

// composerRows is how far up from the bottom a composer's prompt line is
// looked for: room for a multi-line draft.
const composerRows = 40

// promptLine returns the text after a composer's prompt mark.
func promptLine(l string) (string, bool) {
	l = strings.TrimSpace(l)
	l = strings.TrimSpace(strings.Trim(l, "│|"))
	for _, p := range []string{"> ", "❯ ", ">", "❯"} {
		if rest, ok := strings.CutPrefix(l, p); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// SameText reports whether a composer's draft is exactly text, as a TUI
// shows it: line breaks, wrapping and indentation aside.
func SameText(draft, text string) bool {
	return draft != "" && stripBlanks(draft) == stripBlanks(text)
}

// stripBlanks is s without its white space (a screen's wrapping and
// indentation are not the text's).
func stripBlanks(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
