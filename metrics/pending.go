package metrics

import (
	"hash/maphash"
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
//
// It keeps a 64-bit hash of each key and the time as Unix nanoseconds,
// in a map and a ring allocated at their bound once: a send nobody
// replies to (a brief to a pull worker gets no receipt) costs no
// allocation that outlives it, so the heap does not creep up for the
// hours it takes to fill the bound (it did, ~200 B a send). Two keys that
// hash alike would cost one latency sample its accuracy, nothing else.
type pending struct {
	seed maphash.Seed
	mu   sync.Mutex
	at   map[uint64]int64
	ring []uint64 // key hashes in the order they came
	next int
}

func newPending(cap int) *pending {
	return &pending{seed: maphash.MakeSeed(), at: make(map[uint64]int64, cap), ring: make([]uint64, cap)}
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
	h := maphash.String(p.seed, key)
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[h]
	if ok {
		delete(p.at, h) // the first reply only; its ring slot is skipped when it comes round
	}
	return time.Unix(0, at), what, ok
}

func (p *pending) put(key string, at time.Time) {
	h := maphash.String(p.seed, key)
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.ring[p.next]; old != 0 {
		delete(p.at, old)
	}
	p.ring[p.next] = h
	p.next = (p.next + 1) % len(p.ring)
	p.at[h] = at.UnixNano()
}

// size is how many are remembered (tests).
func (p *pending) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.at)
}
