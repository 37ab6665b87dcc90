package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// pending remembers the sends and asks this gateway published until what
// answers them arrives here: a SEND's receipt (INJECTED or FAILED, corr
// its msgId) and first REPLY (the same traceId, from its target back to
// its sender), an ASK's ANSWER (corr its msgId). Both ends are this
// gateway's own Events, so the latency is read on one clock. It holds at
// most cap entries and forgets the oldest past that: a send never replied
// to costs a slot until it is pushed out, never memory without bound. It
// lives in memory only: what a restart forgets is not measured.
type pending struct {
	mu   sync.Mutex
	at   map[string]time.Time
	ring []string // keys in the order they came; "" once matched
	next int
}

func newPending(cap int) *pending {
	return &pending{at: make(map[string]time.Time, cap), ring: make([]string, cap)}
}

// Keys of the three things awaited.
func receiptKey(msgID string) string         { return "r\x00" + msgID }
func answerKey(msgID string) string          { return "a\x00" + msgID }
func replyKey(trace, from, to string) string { return "s\x00" + trace + "\x00" + from + "\x00" + to }

// published remembers a SEND or an ASK this gateway published.
func (p *pending) published(e bridge.Event) {
	if e.Status != "published" && !strings.HasPrefix(e.Status, "spooled") {
		return
	}
	switch e.Kind {
	case bridge.KindSend:
		p.put(receiptKey(e.MsgID), e.At)
		if e.TraceID != "" {
			p.put(replyKey(e.TraceID, e.From, e.To), e.At)
		}
	case bridge.KindAsk:
		p.put(answerKey(e.MsgID), e.At)
	}
}

// answered matches an arrival to what it answers: when that was published
// and what it was (reply, answer or receipt).
func (p *pending) answered(e bridge.Event) (time.Time, string, bool) {
	var key, what string
	switch e.Kind {
	case bridge.KindInjected, bridge.KindFailed:
		key, what = receiptKey(e.Corr), "receipt"
	case bridge.KindAnswer:
		key, what = answerKey(e.Corr), "answer"
	case bridge.KindReply:
		key, what = replyKey(e.TraceID, e.To, e.From), "reply"
	default:
		return time.Time{}, "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[key]
	if ok {
		delete(p.at, key) // the first reply only; its ring slot is skipped when it comes round
	}
	return at, what, ok
}

func (p *pending) put(key string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.ring[p.next]; old != "" {
		delete(p.at, old)
	}
	p.ring[p.next] = key
	p.next = (p.next + 1) % len(p.ring)
	p.at[key] = at
}

// size is how many are remembered (tests).
func (p *pending) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.at)
}
