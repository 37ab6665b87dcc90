package sim

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// What a message is, for the accounting.
const (
	kindSend      = "send"      // primary -> worker (pull or pane)
	kindReply     = "reply"     // worker -> primary
	kindBroadcast = "broadcast" // only duplicates are checked
	kindAnswer    = "answer"    // primary -> the asking worker's turn
)

// msgRec is one accepted message and everything seen of it.
type msgRec struct {
	ID, Tag, Kind string
	Body          string // a placeholder's (Tag empty): what was seen of it
	From, To      string // entity names
	Pane          bool   // into a pane (the forward path)
	Step          int
	Status        string // the call's result

	delivered  map[string]int // recipient name -> times it had it
	typed      map[string]int // pane -> times typed
	submitted  int            // times an Enter started the brief's turn (delivered: the agent has it)
	failed     int            // FAILED notices the sender drained (or the call's own failed status)
	abandoned  int            // ABANDONED notices the sender drained
	receipt    bool           // the sender saw the brief's rung (call status or INJECTED)
	senderGone bool
	history    []string
}

// ask is one bridge_ask and its turn.
type ask struct {
	Tag, Asker, Target, TurnID string
	AskerGID                   string // the asker's incarnation: a respawned one cannot resume it
	Status                     string // latest result
	answer                     string // the tag of the answer the target's call said was delivered
	gotAnswer                  string // the body the asker's call returned
}

// ledger is every accepted message of a run, fed by the actions, the
// fake panes and the drains. One lock guards it.
type ledger struct {
	start time.Time

	mu      sync.Mutex
	byID    map[string]*msgRec
	byTag   map[string]*msgRec
	refused map[string]string // tag -> why the call was not accepted
	asks    map[string]*ask   // turn id -> ask
	counts  map[string]int
}

func newLedger() *ledger {
	return &ledger{start: time.Now(), byID: map[string]*msgRec{}, byTag: map[string]*msgRec{}, refused: map[string]string{},
		asks: map[string]*ask{}, counts: map[string]int{}}
}

func (l *ledger) note(r *msgRec, format string, a ...any) {
	r.history = append(r.history, fmt.Sprintf("%6.3fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, a...))
}

func (l *ledger) count(what string) {
	l.mu.Lock()
	l.counts[what]++
	l.mu.Unlock()
}

// accepted statuses: the call took the message.
var acceptedStatus = map[string]bool{
	bridge.StatusConfirmed: true, bridge.StatusQueued: true, bridge.StatusInjected: true, bridge.StatusSubmitted: true,
	bridge.StatusUncertain: true, bridge.StatusReplied: true, bridge.StatusAsked: true, bridge.StatusPending: true,
	bridge.StatusDelivered: true,
}

// rungStatus: a pane brief's call already told its sender how far it got.
var rungStatus = map[string]bool{bridge.StatusInjected: true, bridge.StatusSubmitted: true, bridge.StatusUncertain: true}

// result records a send's, reply's, broadcast's or answer's outcome.
func (l *ledger) result(step int, kind, tag, from, to string, pane bool, res *bridge.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.refused[tag] = err.Error()
		l.counts["refused: "+clip(err.Error())]++
		return
	case res.MsgID == "" || !(acceptedStatus[res.Status] || res.Status == bridge.StatusFailed):
		l.refused[tag] = res.Status + ": " + res.Reason
		l.counts["refused: "+clip(res.Status+": "+res.Reason)]++
		return
	}
	r := &msgRec{ID: res.MsgID, Tag: tag, Kind: kind, From: from, To: to, Pane: pane, Step: step, Status: res.Status,
		delivered: map[string]int{}, typed: map[string]int{}}
	l.note(r, "step %d: %s %s -> %s: %s %s", step, kind, from, to, res.Status, res.Reason)
	if res.Status == bridge.StatusFailed {
		r.failed++
	}
	if rungStatus[res.Status] {
		r.receipt = true
	}
	// what happened to it before its call returned (typed, drained, answered)
	for _, prev := range []*msgRec{l.byID[res.MsgID], l.byTag[tag]} {
		if prev != nil && prev.Tag == "" {
			r.merge(prev)
		}
	}
	l.byID[res.MsgID], l.byTag[tag] = r, r
	l.counts["accepted "+kind]++
}

// merge takes in what a placeholder saw before r's call returned.
func (r *msgRec) merge(p *msgRec) {
	for k, n := range p.typed {
		r.typed[k] += n
	}
	for k, n := range p.delivered {
		r.delivered[k] += n
	}
	r.submitted += p.submitted
	r.failed += p.failed
	r.abandoned += p.abandoned
	r.receipt = r.receipt || p.receipt
	r.history = append(p.history, r.history...)
	p.typed, p.delivered, p.submitted, p.failed, p.abandoned = nil, nil, 0, 0, 0
}

// placeholder is the record of a message seen before its call returned.
func (l *ledger) placeholder(id, body string) *msgRec {
	if r := l.byID[id]; id != "" && r != nil {
		return r
	}
	if r := l.byTag[body]; body != "" && r != nil {
		return r
	}
	r := &msgRec{ID: id, Body: body, delivered: map[string]int{}, typed: map[string]int{}}
	if id != "" {
		l.byID[id] = r
	}
	if body != "" {
		l.byTag[body] = r
	}
	return r
}

// discarded: the call's gateway was restarted or killed under it, so no client heard
// its result; what it sent may still arrive (a ghost, not a failure).
func (l *ledger) discarded(tag string) {
	l.mu.Lock()
	l.refused[tag] = "its gateway was restarted or killed under the call"
	l.counts["calls cut by a restart or kill"]++
	l.mu.Unlock()
}

// typed is the fake pane's: msgID's brief was typed into pane.
func (l *ledger) typed(msgID, pane string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.placeholder(msgID, "") // typed before its send returned: a placeholder keeps it
	r.typed[pane]++
	l.note(r, "typed into %s (%d)", pane, r.typed[pane])
}

// submitted is the fake pane's: an Enter started msgID's turn. A brief
// typed but never submitted (its Enters swallowed) sits in the composer:
// the agent does not have it, and its sender is told so (a late FAILED).
func (l *ledger) submitted(msgID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.placeholder(msgID, "")
	r.submitted++
	l.note(r, "submitted (%d)", r.submitted)
}

// drained records what entity name drained (delivered: the client has
// it).
func (l *ledger) drained(step int, name string, ms []bridge.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range ms {
		switch m.Kind {
		case bridge.KindFailed, bridge.KindAbandoned, bridge.KindInjected:
			l.notice(step, name, m)
			continue
		case bridge.KindAsk, bridge.KindMissedAsk, bridge.KindNoWaiter, bridge.KindTooLate:
			continue
		}
		r := l.byID[m.MsgID]
		if r == nil || r.Tag == "" {
			r = l.placeholder(m.MsgID, m.Body) // drained before its call returned, or a ghost
		}
		r.delivered[name]++
		l.note(r, "step %d: drained by %s (%d)", step, name, r.delivered[name])
	}
}

// notice is a FAILED, ABANDONED or INJECTED receipt name drained.
func (l *ledger) notice(step int, name string, m bridge.Message) {
	if m.Corr == "" {
		return
	}
	r := l.placeholder(m.Corr, "")
	if r.From != name && r.Tag != "" {
		l.note(r, "step %d: %s notice reached %s, not the sender %s", step, m.Kind, name, r.From)
		l.counts["notices to the wrong entity"]++
	}
	switch m.Kind {
	case bridge.KindFailed:
		r.failed++
	case bridge.KindAbandoned:
		r.abandoned++
	case bridge.KindInjected:
		r.receipt = true
	}
	l.note(r, "step %d: %s drained %s: %s", step, name, m.Kind, m.Body)
}

// askResult records a bridge_ask's outcome (new or resumed).
func (l *ledger) askResult(step int, tag, asker, askerGID, target string, res *bridge.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || res.TurnID == "" {
		if tag != "" {
			l.counts["asks refused"]++
		}
		return
	}
	a := l.asks[res.TurnID]
	if a == nil {
		a = &ask{Tag: tag, Asker: asker, AskerGID: askerGID, Target: target, TurnID: res.TurnID}
		l.asks[res.TurnID] = a
		l.counts["asks accepted"]++
	}
	a.Status = res.Status
	if res.Status == bridge.StatusAnswered {
		for _, m := range res.Messages {
			a.gotAnswer = m.Body
			r := l.placeholder("", m.Body)
			r.delivered[asker]++
			l.note(r, "step %d: the ask of %s took it", step, asker)
		}
	}
}

// terminalAsk: the asker's call needs no resuming.
func terminalAsk(status string) bool {
	switch status {
	case bridge.StatusPending, bridge.StatusAsked, "":
		return false
	}
	return true
}

// pendingAsks are the turns an asker should resume.
func (l *ledger) pendingAsks() []ask {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ask
	for _, a := range l.asks {
		if !terminalAsk(a.Status) {
			out = append(out, *a)
		}
	}
	return out
}

// senderGone marks every message from name: its reports have nowhere to go.
func (l *ledger) senderGone(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.byID {
		if r.From == name {
			r.senderGone = true
		}
	}
}

// settled reports whether r has its fate (and, typed, its receipt).
// Without receipts, a typed brief counts as settled though its sender has
// not heard yet.
func (r *msgRec) settled(receipts bool) bool {
	switch {
	case r.Kind == kindBroadcast || r.Tag == "":
		return true
	case r.Pane:
		// typed but not submitted: own-draft recovery submits it or reports
		// it FAILED; past the receipts' wait, its "uncertain" stands
		return (r.submitted > 0 && r.receipt) || (len(r.typed) > 0 && !receipts) || r.failed > 0 || r.abandoned > 0
	}
	return len(r.delivered) > 0 || r.failed > 0 || r.abandoned > 0
}

// unsettled counts messages (and asks) still without their fate; excused
// (called with l.mu held) names those none can come for.
func (l *ledger) unsettled(receipts bool, excused func(*msgRec) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.byID {
		if !r.settled(receipts) && !r.senderGone && !excused(r) {
			n++
		}
	}
	return n
}

func (r *msgRec) String() string {
	return fmt.Sprintf("%s %s %s -> %s (%q, step %d, %s)\n      %s", r.Kind, r.ID, r.From, r.To, r.Tag, r.Step, r.Status, strings.Join(r.history, "\n      "))
}

// clip keeps the start of a reason: enough to group refusals by cause.
func clip(s string) string {
	if len(s) > 48 {
		return s[:48]
	}
	return s
}
