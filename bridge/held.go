package bridge

import (
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// heldMsg is a message held for an entity until it drains it. Its head
// stays in memory; the whole envelope only while the message is in flight:
// not yet spilled to the store (the transport still has it: acks set) or
// claimed by a call. A spilled message is acked in its transport, so a
// backlog costs one head per message in memory (about 112 bytes, plus its
// index entry) and never fills the prefetch window (spill.go).
type heldMsg struct {
	head     heldHead
	env      *Envelope // the whole message; nil while it is only in the store
	seq      uint64    // its record in the store; 0: not spilled
	acks     *heldAcks // what it still owes its transport; nil once acked
	claimed  bool
	spilling bool // queued to the spiller
	settled  bool // left the held set (drained, expired)
	// spillState: queued (0), taken by the spill loop (1), or dropped
	// while queued (2); the spiller counts the dropped ones it still holds
	spillState atomic.Int32
	cost       uint32 // its body's jsonCost: what it takes of a result's byte budget (budget.go)

	// redelivered: a call handed it over and its client may have read it
	// (handover.go), so a later result flags it as a possible duplicate
	redelivered bool
}

// heldAcks settles a held message in its transport: its delivery, and
// earlier deliveries of the same msgId (settled with it).
type heldAcks struct {
	acker Acker
	dups  []Acker
}

// all is every acker, once.
func (a *heldAcks) all() []Acker {
	if a == nil {
		return nil
	}
	return append([]Acker{a.acker}, a.dups...)
}

// heldHead is what filters, summaries, de-duplication and the sweeper read
// of a held message without loading it, in a compact form: ids parsed
// (Validate requires UUIDs), the sender interned per entity, the kind one
// of the constants.
type heldHead struct {
	from     string
	kind     Kind
	id       msgKey
	corr     msgKey  // zero: none
	trace    msgKey  // the traceId, for logs and Events; zero: none
	exp      int64   // expiresAt, Unix nanoseconds
	spelling *string // the msgId as sent when it is not the canonical lower-case form
}

// msgKey is a message id, parsed.
type msgKey [16]byte

// keyOf parses id; one that is not a UUID (never, once validated) is zero.
func keyOf(id string) msgKey {
	u, err := uuid.Parse(id)
	if err != nil {
		return msgKey{}
	}
	return msgKey(u)
}

// kindConst maps a decoded kind to its constant, so a head does not keep
// the decoded string alive.
var kindConst = func() map[Kind]Kind {
	m := map[Kind]Kind{}
	for k := range kinds {
		m[k] = k
	}
	return m
}()

func newHeld(env *Envelope, acker Acker) *heldMsg {
	hm := &heldMsg{env: env, head: heldHead{kind: kindConst[env.Kind], from: env.From, id: keyOf(env.MsgID),
		exp: env.ExpiresAt.UnixNano()}, cost: uint32(jsonCost(env.Body))}
	if hm.head.kind == "" {
		hm.head.kind = env.Kind
	}
	if env.Corr != "" {
		hm.head.corr = keyOf(env.Corr)
	}
	if env.TraceID != "" {
		hm.head.trace = keyOf(env.TraceID)
	}
	if !canonicalID(env.MsgID) {
		id := env.MsgID
		hm.head.spelling = &id
	}
	if acker != nil {
		hm.acks = &heldAcks{acker: acker}
	}
	return hm
}

// canonicalID reports whether id (a UUID, as Validate requires) is in the
// lower-case hyphenated form uuid.String gives back, so the head need not
// keep the spelling: checked without building that string per arrival.
func canonicalID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f'):
			return false
		}
	}
	return true
}

// msgID is the message's id as it was sent.
func (h *heldHead) msgID() string {
	if h.spelling != nil {
		return *h.spelling
	}
	return uuid.UUID(h.id).String()
}

// traceID is the message's traceId in its canonical spelling ("" for none).
func (h *heldHead) traceID() string {
	if h.trace == (msgKey{}) {
		return ""
	}
	return uuid.UUID(h.trace).String()
}

func (h *heldHead) expiresAt() time.Time { return time.Unix(0, h.exp) }

// view is the envelope filters and waiters see: the whole one when in
// memory, else the head's kind, sender and expiry written into scratch —
// what every filter reads (a filter needing more must load the message).
func (hm *heldMsg) view(scratch *Envelope) *Envelope {
	if hm.env != nil {
		return hm.env
	}
	*scratch = Envelope{Kind: hm.head.kind, From: hm.head.from, ExpiresAt: hm.head.expiresAt()}
	return scratch
}
