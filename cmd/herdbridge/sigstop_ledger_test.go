package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// tagLedger counts every uniquely tagged message of a run: what each
// sender was told, and what the worker's clients were handed. The promise
// it checks (README "Semantics", the ack rule): a send answered with a
// msgId ends delivered — more than once only if the repeat says
// `redelivered` — or FAILED to its sender; never neither.
type tagLedger struct {
	mu        sync.Mutex
	sent      int               // send calls made
	accepted  map[string]string // tag → msgId, for sends answered with one
	unknown   map[string]string // tag → error, for sends whose outcome the client never got
	refused   map[string]string // tag → the tool error a send returned
	delivered map[string]int    // tag → times a worker's client got it
	flagged   int               // repeats that carried redelivered
	unflagged int               // repeats that did not
	firstFlag int               // first deliveries flagged redelivered (harmless)
	failed    map[string]string // msgId → the FAILED notice's body
	polls     map[string]int    // worker poll calls by outcome, for the log
}

func newTagLedger() *tagLedger {
	return &tagLedger{accepted: map[string]string{}, unknown: map[string]string{}, refused: map[string]string{},
		delivered: map[string]int{}, failed: map[string]string{}, polls: map[string]int{}}
}

// noteSend records what a send of tag came back with.
func (l *tagLedger) noteSend(tag string, r gatewaytest.CallResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	switch {
	case err != nil:
		l.unknown[tag] = err.Error()
	case r.IsError || r.MsgID == "" || r.Status == bridge.StatusFailed:
		l.refused[tag] = r.Status + ": " + r.Text
	default:
		l.accepted[tag] = r.MsgID
	}
}

// notePoll records one worker poll: its outcome, and each message it got.
func (l *tagLedger) notePoll(outcome string, msgs []bridge.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls[outcome]++
	for _, m := range msgs {
		n := l.delivered[m.Body]
		l.delivered[m.Body] = n + 1
		switch {
		case n > 0 && m.Redelivered:
			l.flagged++
		case n > 0:
			l.unflagged++
		case m.Redelivered:
			l.firstFlag++
		}
	}
}

// noteNotices records the FAILED notices in a sender's poll.
func (l *tagLedger) noteNotices(msgs []bridge.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		if m.Kind == bridge.KindFailed {
			l.failed[m.Corr] = m.Body
		}
	}
}

// open lists the accepted tags with no fate yet (neither delivered nor
// reported FAILED).
func (l *tagLedger) open() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for tag, id := range l.accepted {
		if l.delivered[tag] == 0 && l.failed[id] == "" {
			out = append(out, tag)
		}
	}
	sort.Strings(out)
	return out
}

// msgID is the msgId the send of tag was answered with.
func (l *tagLedger) msgID(tag string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted[tag]
}

// unknowns is up to n sends whose outcome the client never got, with
// why: not confirmed, so no promise, but worth seeing.
func (l *tagLedger) unknowns(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for tag, why := range l.unknown {
		if len(out) == n {
			break
		}
		out = append(out, tag+": "+why)
	}
	sort.Strings(out)
	return out
}

// tally is the run's count, for the log and the checks.
type tally struct {
	sent, accepted, unknown, refused         int
	delivered, dups, flagged, unflagged      int
	firstFlagged, failed, both, lost, strays int
	polls                                    string
}

func (l *tagLedger) tally() tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tally{sent: l.sent, accepted: len(l.accepted), unknown: len(l.unknown), refused: len(l.refused),
		flagged: l.flagged, unflagged: l.unflagged, firstFlagged: l.firstFlag, failed: len(l.failed)}
	for tag, n := range l.delivered {
		t.delivered++
		t.dups += n - 1
		if _, ok := l.accepted[tag]; !ok {
			if _, ok := l.unknown[tag]; !ok {
				t.strays++ // a body no send of this run carried
			}
		}
	}
	for tag, id := range l.accepted {
		switch got, rep := l.delivered[tag] > 0, l.failed[id] != ""; {
		case got && rep:
			t.both++
		case !got && !rep:
			t.lost++
		}
	}
	var ps []string
	for k, n := range l.polls {
		ps = append(ps, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(ps)
	t.polls = strings.Join(ps, " ")
	return t
}

func (t tally) String() string {
	return fmt.Sprintf("sent %d, confirmed %d (unknown outcome %d, refused %d); delivered %d unique, %d duplicates "+
		"(%d flagged redelivered, %d unflagged; %d first deliveries flagged); FAILED %d; delivered and FAILED %d; lost %d; "+
		"stray bodies %d; worker polls: %s",
		t.sent, t.accepted, t.unknown, t.refused, t.delivered, t.dups, t.flagged, t.unflagged, t.firstFlagged,
		t.failed, t.both, t.lost, t.strays, t.polls)
}
