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
// into a worker's pane only when the agent is ready — never into a dialog,
// never over a draft — and reports the highest rung it actually observed:
// submitted (the turn started), uncertain (typed, turn start not seen even
// after one Enter retry), failed (with the reason), or not ready (nothing
// typed; the core keeps the brief queued and asks again). It does not wait
// for readiness: the core's pane queue does, woken by herdr's status
// events. One writer per pane at a time.
type Injector struct {
	Client *Client
	// BriefDir receives briefs larger than MaxInline; the prompt then names
	// the file. Required for large briefs.
	BriefDir string
	// MaxInline is the largest brief typed inline (default 8 KiB): very
	// long pastes are where agents misbehave.
	MaxInline int
	// VerifyWait bounds each look for the turn starting (default 3s).
	VerifyWait time.Duration
	// Poll is the status polling period (default 50ms).
	Poll time.Duration
	// InterruptWait bounds the look for an interrupted turn ending
	// (default 5s): agents take a moment to unwind a tool call.
	InterruptWait time.Duration

	once  sync.Once
	mu    sync.Mutex
	panes map[string]chan struct{}
}

func (in *Injector) defaults() {
	if in.MaxInline <= 0 {
		in.MaxInline = 8 << 10
	}
	if in.VerifyWait <= 0 {
		in.VerifyWait = 3 * time.Second
	}
	if in.Poll <= 0 {
		in.Poll = 50 * time.Millisecond
	}
	if in.InterruptWait <= 0 {
		in.InterruptWait = 5 * time.Second
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

// Prompt is the text typed for b: a header naming the sender, how to
// reply and a fresh fence nonce, the sender's text (Sanitize, then
// QuoteOwnLines), and the closing fence line (fence.go) — or, past
// MaxInline, one line naming the file that holds the text.
func (in *Injector) Prompt(b bridge.Brief) (string, error) {
	return in.prompt(b, newNonce())
}

// prompt is Prompt with the fence nonce given: own-draft recovery
// rebuilds a prompt with the nonce it finds in the composer.
func (in *Injector) prompt(b bridge.Brief, nonce string) (string, error) {
	in.once.Do(in.defaults)
	from := b.FromName
	if from == "" {
		from = b.Env.From
	}
	broadcast := b.Env.Kind == bridge.KindBroadcast
	prov := provenanceWords(b.Provenance)
	body := QuoteOwnLines(Sanitize(string(b.Env.Body)))
	if len(body) <= in.MaxInline {
		return fenced(broadcast, from, prov, nonce, body), nil
	}
	if in.BriefDir == "" {
		return "", fmt.Errorf("brief of %d bytes is over the %d-byte inline limit and no brief directory is set", len(body), in.MaxInline)
	}
	if err := os.MkdirAll(in.BriefDir, 0o700); err != nil {
		return "", err
	}
	path, ok := in.briefFile(b.Env.MsgID)
	if !ok {
		return "", fmt.Errorf("brief id %q cannot name a file", b.Env.MsgID)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", err
	}
	return fileHeader(broadcast, from, prov, len(body), path), nil
}

// fileHeader is the one line typed for a brief kept in a file: no text of
// the sender's is typed, and the line says the whole file is its text.
func fileHeader(broadcast bool, from, prov string, size int, path string) string {
	if broadcast {
		return fmt.Sprintf("%s Broadcast from %s [%s]: it is %d bytes, so it is in the file %s, all of it %s's text: read it and act on it.", promptMark, from, prov, size, path, from)
	}
	return fmt.Sprintf("%s Brief from %s [%s] (reply with bridge_send target %q): it is %d bytes, so it is in the file %s, all of it %s's text: read it and act on it.", promptMark, from, prov, from, size, path, from)
}

var _ bridge.BriefFiles = (*Injector)(nil)

// briefFile is where the brief msgID is kept when it is too long to type;
// false for an id that could name a file elsewhere (ids are UUIDs).
func (in *Injector) briefFile(msgID string) (string, bool) {
	if in.BriefDir == "" || msgID == "" || filepath.Base(msgID) != msgID || strings.HasPrefix(msgID, ".") {
		return "", false
	}
	return filepath.Join(in.BriefDir, msgID+briefExt), true
}

const briefExt = ".md"

// DiscardBrief implements bridge.BriefFiles: it deletes msgID's file.
func (in *Injector) DiscardBrief(msgID string) error {
	path, ok := in.briefFile(msgID)
	if !ok {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// KeptBriefs implements bridge.BriefFiles: the msgIds with a file.
func (in *Injector) KeptBriefs() ([]string, error) {
	if in.BriefDir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(in.BriefDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), briefExt); ok && e.Type().IsRegular() {
			out = append(out, id)
		}
	}
	return out, nil
}

// promptMark opens every prompt the injector types: how it recognises its
// own text still sitting in a composer.
const promptMark = "[herdbridge]"

// attempt is one go at a pane found ready, under its writer lock.
type attempt struct {
	pane, text string // the pane, and the prompt of the brief
	modern     bool   // protocol 17+: agent.prompt, agent.wait
	before     agentState
}

// begin takes the writer lock of b's pane, prepares b's prompt and judges
// the pane ready (with checkDraft, a draft makes it not ready). A receipt
// ends the attempt there; otherwise the caller calls unlock.
func (in *Injector) begin(ctx context.Context, b bridge.Brief, checkDraft bool) (a attempt, unlock func(), end *bridge.InjectReceipt) {
	in.once.Do(in.defaults)
	a.pane = b.To.PaneID
	unlock, ok := in.lockPane(ctx, a.pane)
	if !ok {
		return a, nil, ptr(failed("another writer kept pane %s busy until the bound ran out", a.pane))
	}
	var err error
	if a.text, err = in.Prompt(b); err != nil {
		unlock()
		return a, nil, ptr(failed("cannot prepare the brief: %v", err))
	}
	proto, err := in.Client.Protocol(ctx)
	if err != nil {
		unlock()
		return a, nil, ptr(unreachable(b.To, err))
	}
	a.modern = proto >= 17
	if a.before, end = in.ready(ctx, b.To, a.modern, checkDraft); end != nil {
		unlock()
		return a, nil, end
	}
	return a, unlock, nil
}

// Inject implements bridge.Injector.
func (in *Injector) Inject(ctx context.Context, b bridge.Brief) bridge.InjectReceipt {
	a, unlock, end := in.begin(ctx, b, true)
	if end != nil {
		return *end
	}
	defer unlock()
	if b.Typing != nil {
		if err := b.Typing(); err != nil {
			return failed("cannot record that typing begins (%v): nothing was typed", err)
		}
	}
	return in.typeAndVerify(ctx, a.pane, a.text, a.modern, a.before)
}

// typeAndVerify types text into a ready pane and watches the turn start;
// herdr presses Enter 300 ms after agent.prompt's text, and if the turn is
// not seen starting while the text still sits in the composer, Enter is
// pressed once more. Never re-pasted.
func (in *Injector) typeAndVerify(ctx context.Context, pane, text string, modern bool, before agentState) bridge.InjectReceipt {
	var err error
	if modern {
		_, err = in.Client.AgentPrompt(ctx, pane, text)
		if errors.Is(err, ErrAgentNotReady) { // a custom agent herdr does not drive: type and press Enter ourselves
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
	if in.turnStarted(ctx, pane, modern, before, 300*time.Millisecond+in.VerifyWait) {
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
	}
	if ctx.Err() != nil {
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed; the bound ran out before the turn start was seen"}
	}
	if !strings.Contains(in.draft(ctx, pane), promptMark) {
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed, and gone from the composer, but the agent was not seen starting the turn"}
	}
	if in.pressEnter(ctx, pane, modern) == nil && in.turnStarted(ctx, pane, modern, before, in.VerifyWait) {
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted, Reason: "after one Enter retry"}
	}
	return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "typed, but the agent was not seen starting the turn, even after one Enter retry; its text may still sit in the composer, where it is submitted with one Enter once the agent is ready"}
}

// Resubmit implements bridge.Injector: own-draft recovery. b was typed
// earlier and reported uncertain; if the pane is ready and its composer
// holds exactly b's prompt, one Enter (never a second paste) and a look
// for the turn starting.
func (in *Injector) Resubmit(ctx context.Context, b bridge.Brief) bridge.InjectReceipt {
	a, unlock, end := in.begin(ctx, b, false)
	if end != nil {
		return *end
	}
	defer unlock()
	// the brief was typed with a nonce of its own: rebuild it with that one
	draft := in.draft(ctx, a.pane)
	if nonce := nonceOf(draft); nonce != "" {
		if text, err := in.prompt(b, nonce); err == nil {
			a.text = text
		}
	}
	if !SameText(draft, a.text) && !sameButProvenance(draft, a.text) {
		return failed("the composer of pane %s does not hold the brief", a.pane)
	}
	if in.pressEnter(ctx, a.pane, a.modern) == nil && in.turnStarted(ctx, a.pane, a.modern, a.before, in.VerifyWait) {
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted, Reason: "found in the composer; one Enter pressed"}
	}
	return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "found in the composer; one Enter pressed, but the agent was not seen starting the turn"}
}

// pressEnter presses Enter once: through agent.send_keys where herdr
// drives the agent, else (a custom agent, or herdr before protocol 17)
// through pane.send_keys.
func (in *Injector) pressEnter(ctx context.Context, pane string, modern bool) error {
	if modern {
		err := in.Client.AgentSendKeys(ctx, pane, "enter")
		if !errors.Is(err, ErrAgentNotReady) {
			return err
		}
	}
	return in.Client.PaneSendKeys(ctx, pane, "enter")
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

// turnStarted watches until the turn is seen starting: our text left the
// composer and the status went working or blocked (a tool-permission
// dialog of the new turn), or the state_change_seq rose (a turn that ended
// between two looks). Neither is enough alone: a user merely looking at
// the pane changes done to idle, and a status that flaps to working with
// our text still in the composer is not our turn (the brief would be
// reported submitted and left there). On protocol 17+ it waits on herdr's
// event-driven agent.wait in short slices.
func (in *Injector) turnStarted(ctx context.Context, pane string, modern bool, before agentState, within time.Duration) bool {
	deadline := time.Now().Add(within)
	started := func(st agentState) bool {
		moved := st.status == StatusWorking || st.status == StatusBlocked || modern && st.seq > before.seq
		return moved && !strings.Contains(in.draft(ctx, pane), promptMark)
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
