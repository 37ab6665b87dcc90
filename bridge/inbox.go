package bridge

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// entState is one local entity: what it is, and its inbox as the gateway
// holds it — held messages, open waiters, receipts and turns it waits on.
// mu guards everything but GID, Name, Host and Registered, which never
// change. Where it sits in the lock order: the package doc (core.go).
type entState struct {
	mu sync.Mutex
	Entity
	histOn  atomic.Bool // Entity.History, read without mu by the publish path
	tokens  []string
	sub     Subscription
	removed bool // dropped from the registry: deliveries treat it as gone
	// goneWhy, when set, is why it is being removed (bridge_stop): the
	// sentence its counterparts' ABANDONED carries instead of the generic one.
	goneWhy string

	held     []*heldMsg // arrival order
	heldByID map[msgKey]*heldMsg
	// unwritten: held messages not yet queued for the store, in arrival
	// order (settled ones are skipped lazily); stored: how many held are
	// written or being written (spill.go)
	unwritten []*heldMsg
	stored    int
	froms     map[string]string // interned senders of held messages (internFrom)
	waiters   []*waiter
	receipts  map[string]*receiptBox // outgoing msgId -> where its INJECTED/FAILED/TOO_LATE/ABANDONED go
	asks      map[string]*askTurn    // turns this entity asked, by turnId
	askByMsg  map[string]*askTurn    // the same, by the ASK's msgId
	turns     map[string]*recvTurn   // asks this entity received and may answer, by turnId
	brief     briefRef               // the brief it is working on: default target of bridge_ask
	book      *turnBook              // persists asks and turns; nil: kept in memory only

	sessions   int
	paneStatus string // live herdr agent status, for the roster
	detachedAt time.Time
	lastSeen   time.Time // last activity: a session open or ending, a tool call, a registration (reap.go)
	savedSeen  time.Time // lastSeen as the state file has it
	lastNudge  time.Time
}

type briefRef struct {
	from, msgID, traceID string
}

func newEntState(e Entity, book *turnBook) *entState {
	st := &entState{
		Entity:   e,
		book:     book,
		heldByID: map[msgKey]*heldMsg{},
		receipts: map[string]*receiptBox{},
		asks:     map[string]*askTurn{},
		askByMsg: map[string]*askTurn{},
		turns:    map[string]*recvTurn{},
	}
	st.histOn.Store(e.History)
	return st
}

// Addr is name@host without taking mu: GID, Name and Host never change
// after registration, while Entity.Addr would copy the whole struct, racing
// with a re-registration that updates Role, Groups or PaneID under mu.
func (st *entState) Addr() string { return st.Name + "@" + st.Host }

// snapshot copies the entity (mu held).
func (st *entState) snapshot() Entity {
	e := st.Entity
	e.Groups = append([]string(nil), st.Groups...)
	return e
}

// view copies the entity, taking mu.
func (st *entState) view() Entity {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.snapshot()
}

func (st *entState) bound(key string) bool {
	if key == BroadcastAll {
		return true
	}
	for _, g := range st.Groups {
		if BroadcastKey(g) == key {
			return true
		}
	}
	return false
}

// waiter is an open blocking call of an entity that one arriving message
// resolves.
type waiter struct {
	accept func(*Envelope) bool
	ch     chan *heldMsg // capacity 1: exactly one message resolves a waiter
	gone   bool
	isSend bool
	onHeld func() // an open send is told when something else is held
}

// match hands hm to the first waiter that accepts it (mu held).
func (st *entState) match(hm *heldMsg) bool {
	var scratch Envelope
	for i, w := range st.waiters {
		if w.gone || !w.accept(hm.view(&scratch)) {
			continue
		}
		st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
		w.gone = true
		hm.claimed = true
		w.ch <- hm
		return true
	}
	return false
}

// addWaiter opens w (mu held).
func (st *entState) addWaiter(w *waiter) { st.waiters = append(st.waiters, w) }

func (st *entState) removeWaiter(w *waiter) {
	for i, x := range st.waiters {
		if x == w {
			st.waiters = append(st.waiters[:i], st.waiters[i+1:]...)
			break
		}
	}
	w.gone = true
}

// close ends w if nothing resolved it yet and reports whether a message
// claimed it (then it sits in w.ch).
func (st *entState) close(w *waiter) (claimed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if w.gone {
		return true
	}
	st.removeWaiter(w)
	return false
}

// receiptBox is where an open call takes the receipts of its message. A
// kept box's receipts stay unacked in their transport until the call reads
// one (acked then: receiptRead) or ends without reading it (held then,
// with its acker, like any arrival): a restart in between hands the copy
// back instead of losing a receipt that only memory had.
type receiptBox struct {
	ch     chan *Envelope
	kept   bool
	ackers map[string]Acker // by receipt msgId: in ch, not yet read (kept only)
}

// offer hands env to the call (st.mu held); false when its buffer is
// full, and a kept receipt is then held instead of dropped.
func (b *receiptBox) offer(env *Envelope, acker Acker) bool {
	select {
	case b.ch <- env:
	default:
		return !b.kept
	}
	if b.kept && acker != nil {
		b.ackers[env.MsgID] = acker
	}
	return true
}

// expectReceipt opens a channel for the receipts of msgID, one of st's
// outgoing messages; done closes it.
func (st *entState) expectReceipt(msgID string) (receipts <-chan *Envelope, done func()) {
	ch := st.openReceipts(msgID, false)
	return ch, func() {
		st.mu.Lock()
		delete(st.receipts, msgID)
		st.mu.Unlock()
	}
}

// openReceipts registers the box msgID's receipts are handed to.
func (st *entState) openReceipts(msgID string, kept bool) chan *Envelope {
	b := &receiptBox{ch: make(chan *Envelope, 4), kept: kept, ackers: map[string]Acker{}}
	st.mu.Lock()
	st.receipts[msgID] = b
	st.mu.Unlock()
	return b.ch
}

// receiptRead takes the acker of env, a receipt a call just read from its
// box, if it is still to be acked (kept).
func (st *entState) receiptRead(env *Envelope) Acker {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.receipts[env.Corr]
	if b == nil {
		return nil
	}
	a := b.ackers[env.MsgID]
	delete(b.ackers, env.MsgID)
	return a
}

// expectReceiptKept is expectReceipt for a call whose receipts its entity
// must learn even when the call stops reading before they come: done
// moves what reached the channel unread into the held set, with its
// acker, to be drained like a receipt that arrived after the call.
func (st *entState) expectReceiptKept(msgID string) (receipts <-chan *Envelope, done func()) {
	ch := st.openReceipts(msgID, true)
	return ch, func() {
		for _, a := range st.closeKept(msgID) {
			_ = a.Ack() // a NO_WAITER only an ask awaits: settled
		}
	}
}

// closeKept deregisters msgID's kept box and holds what it has unread; it
// returns the ackers of what needs no holding.
func (st *entState) closeKept(msgID string) []Acker {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.receipts[msgID]
	delete(st.receipts, msgID)
	if b == nil {
		return nil
	}
	var settled []Acker
	for {
		select {
		case env := <-b.ch:
			acker := b.ackers[env.MsgID]
			switch {
			case env.Kind != KindNoWaiter:
				st.addHeld(newHeld(env, acker)) // still in its transport until spilled or drained
			case acker != nil:
				settled = append(settled, acker)
			}
		default:
			return settled
		}
	}
}

func (st *entState) findHeld(msgID string) *heldMsg { return st.heldByID[keyOf(msgID)] }

// addHeld appends hm to the held set (mu held).
func (st *entState) addHeld(hm *heldMsg) {
	st.held = append(st.held, hm)
	st.heldByID[hm.head.id] = hm
	if hm.seq != 0 {
		st.stored++
	} else {
		st.unwritten = append(st.unwritten, hm)
	}
}

// heldReceipt reports whether a receipt for msgID is held (mu held).
func (st *entState) heldReceipt(msgID string) bool {
	key := keyOf(msgID)
	for _, hm := range st.held {
		if k := hm.head.kind; hm.head.corr == key && (k == KindInjected || k == KindFailed || k == KindAbandoned) {
			return true
		}
	}
	return false
}

func (st *entState) dropHeld(set map[*heldMsg]bool) {
	out := st.held[:0]
	for _, hm := range st.held {
		if !set[hm] {
			out = append(out, hm)
			continue
		}
		hm.settled = true
		if hm.seq != 0 || hm.spilling {
			st.stored--
		}
		if st.heldByID[hm.head.id] == hm {
			delete(st.heldByID, hm.head.id)
		}
	}
	if len(out) == 0 {
		st.froms = nil // senders are interned for held messages only
	}
	for i := len(out); i < len(st.held); i++ {
		st.held[i] = nil
	}
	st.held = out
}

// claimHeld marks up to max unclaimed held messages accepted by f as
// claimed, in arrival order, while they fit in b (the first one always
// does); more is how many others f accepts that stay unclaimed (mu held).
// It stops at the first that does not fit: a later, smaller message never
// overtakes it.
func (st *entState) claimHeld(f func(*Envelope) bool, max int, b *budget) (out []*heldMsg, more int) {
	var scratch Envelope
	full := false
	for _, hm := range st.held {
		if hm.claimed || !f(hm.view(&scratch)) {
			continue
		}
		if full = full || len(out) >= max || !b.fits(int(hm.cost)); full {
			more++
			continue
		}
		hm.claimed = true
		out = append(out, hm)
	}
	return out, more
}

// unclaimedHeld counts the held messages no call has taken (mu held).
func (st *entState) unclaimedHeld() int {
	n := 0
	for _, hm := range st.held {
		if !hm.claimed {
			n++
		}
	}
	return n
}

// summary says what is held for st (mu held).
func (c *Core) summary(st *entState) HeldSummary {
	counts := map[string]int{}
	var s HeldSummary
	for _, hm := range st.held {
		if hm.claimed {
			s.InFlight++
			continue
		}
		s.Total++
		counts[hm.head.from]++
	}
	for from, n := range counts {
		s.From = append(s.From, FromCount{From: from, FromName: c.nameOf(from), Count: n})
	}
	sort.Slice(s.From, func(i, j int) bool { return s.From[i].FromName < s.From[j].FromName })
	return s
}

// nameOf is the name of gid: a local entity's name, a remote one's
// name@host, "" when unknown. It takes only leaf locks.
func (c *Core) nameOf(gid string) string {
	if st := c.reg.get(gid); st != nil {
		return st.Name // never changes: no entity lock needed
	}
	return c.pres.name(gid)
}

// heldFor returns the caller's held summary, nil when nothing is held.
func (c *Core) heldFor(st *entState) *HeldSummary {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := c.summary(st)
	if s.Total == 0 && s.InFlight == 0 {
		return nil
	}
	return &s
}

// Held reports what is held for gid and whether it has an open waiter.
func (c *Core) Held(gid string) (HeldSummary, bool) {
	st := c.reg.get(gid)
	if st == nil {
		return HeldSummary{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return c.summary(st), len(st.waiters) > 0
}

// heldNoWaiter nudges (mu held): an open send is told at once; otherwise
// the entity's sessions are nudged by the nudge loop.
func (c *Core) heldNoWaiter(st *entState) {
	for _, w := range st.waiters {
		if w.isSend && w.onHeld != nil {
			w.onHeld()
			return
		}
	}
	c.nudges.want(st.GID)
}
