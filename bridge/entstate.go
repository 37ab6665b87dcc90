package bridge

import (
	"sort"
	"sync/atomic"
)

// entState is one local entity: what it is, and its inbox as the gateway
// holds it. It is made of parts, each a small type in its own file whose
// methods are the only code that writes its fields (internal/arch checks
// it), so each part's invariants have one owner:
//
//	heldSet     held messages, their index, the spill heads (heldset.go)
//	waitList    open waiters and the last nudge (waiters.go)
//	turnState   asks sent and received, the brief it works on (turns.go)
//	activity    sessions, the reattach grace, last activity, pane status (activity.go)
//	lifecycle   the inbox's consumer, removed, why it is stopped (lifecycle.go)
//	tokenList   its token hashes (token.go)
//
// The entity itself (Entity) is changed by reregister only, and receipts
// (the calls waiting for their message's receipts) by the expectReceipt
// methods below. One lock, mu,
// guards every part and the entity but GID, Name, Host and Registered,
// which never change: the parts take no lock, their callers hold mu. Where
// it sits in the lock order: doc.go.
type entState struct {
	mu entMutex
	Entity
	histOn atomic.Bool // Entity.History, read without mu by the publish path

	heldSet
	waitList
	turnState
	activity
	lifecycle
	tokenList

	receipts map[string]*receiptBox // outgoing msgId -> where its INJECTED/FAILED/TOO_LATE/ABANDONED go
}

func newEntState(e Entity, book *turnBook) *entState {
	st := &entState{
		Entity:    e,
		heldSet:   newHeldSet(),
		waitList:  waitList{},
		turnState: newTurnState(e.GID, book),
		receipts:  map[string]*receiptBox{},
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

// reregister updates what a registration of the existing name changes
// (mu held): role and groups always; pane, profile and history when
// given. History is mirrored in histOn, which the publish path reads
// without mu.
func (st *entState) reregister(req RegisterRequest, groups []string) {
	st.Role, st.Groups = req.Role, groups
	if req.PaneID != "" {
		st.PaneID = req.PaneID
	}
	if req.Profile != "" {
		st.Profile = req.Profile
	}
	if req.History != nil {
		st.History = *req.History
		st.histOn.Store(*req.History)
	}
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
	if st.tellSend() {
		return
	}
	c.nudges.want(st.GID)
}
