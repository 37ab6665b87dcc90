package bridge

// heldSet is the part of an entity's record that holds its messages (its
// entState's mu guards it; every method runs with mu held). It owns three
// invariants that other files used to keep by editing its fields:
//
//   - held and heldByID list the same messages: held in arrival order,
//     heldByID by msgId (the first of a duplicated id);
//   - stored counts the held messages written to the store or queued to be
//     (seq != 0 or spilling), the figure InboxMaxLength caps (spill.go);
//   - unwritten lists, in arrival order, the held messages not yet queued
//     for the store; settled, written or queued ones are skipped lazily at
//     its head (nextUnwritten).
//
// froms interns the senders of held messages (internFrom), and is dropped
// whenever nothing is held. Claiming (a call takes a held message, to hand
// it over or settle it) goes through claimHeld and claimUnclaimed, and
// back through unclaim; a waiter a message resolves claims it in match
// (waiters.go).
type heldSet struct {
	held      []*heldMsg // arrival order
	heldByID  map[msgKey]*heldMsg
	unwritten []*heldMsg
	stored    int
	froms     map[string]string
}

func newHeldSet() heldSet { return heldSet{heldByID: map[msgKey]*heldMsg{}} }

func (s *heldSet) findHeld(msgID string) *heldMsg { return s.heldByID[keyOf(msgID)] }

// addHeld appends hm to the held set.
func (s *heldSet) addHeld(hm *heldMsg) {
	s.held = append(s.held, hm)
	s.heldByID[hm.head.id] = hm
	if hm.seq != 0 {
		s.stored++
	} else {
		s.unwritten = append(s.unwritten, hm)
	}
}

// heldReceipt reports whether a receipt for msgID is held.
func (s *heldSet) heldReceipt(msgID string) bool {
	key := keyOf(msgID)
	for _, hm := range s.held {
		if k := hm.head.kind; hm.head.corr == key && (k == KindInjected || k == KindFailed || k == KindAbandoned) {
			return true
		}
	}
	return false
}

// dropHeld takes the messages of set out of the held set, settled, and
// returns how many of them (and their body bytes) were queued for the
// spiller and not yet taken by it: they no longer count as its backlog.
func (s *heldSet) dropHeld(set map[*heldMsg]bool) (queued, queuedBytes int) {
	out := s.held[:0]
	for _, hm := range s.held {
		if !set[hm] {
			out = append(out, hm)
			continue
		}
		hm.settled = true
		if hm.seq != 0 || hm.spilling {
			s.stored--
		}
		if hm.spilling && hm.seq == 0 && hm.spillState.CompareAndSwap(spillQueued, spillDropped) {
			queued++
			if hm.env != nil {
				queuedBytes += len(hm.env.Body)
			}
		}
		if s.heldByID[hm.head.id] == hm {
			delete(s.heldByID, hm.head.id)
		}
	}
	if len(out) == 0 {
		s.froms = nil // senders are interned for held messages only
	}
	for i := len(out); i < len(s.held); i++ {
		s.held[i] = nil
	}
	s.held = out
	return queued, queuedBytes
}

// claimHeld marks up to max unclaimed held messages accepted by f as
// claimed, in arrival order, while they fit in b (the first one always
// does); more is how many others f accepts that stay unclaimed.
// It stops at the first that does not fit: a later, smaller message never
// overtakes it.
func (s *heldSet) claimHeld(f func(*Envelope) bool, max int, b *budget) (out []*heldMsg, more int) {
	var scratch Envelope
	full := false
	for _, hm := range s.held {
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

// claimUnclaimed claims, in arrival order, every held message no call has
// taken that take accepts (nil: every one), for the caller to settle.
func (s *heldSet) claimUnclaimed(take func(*heldMsg) bool) []*heldMsg {
	var out []*heldMsg
	for _, hm := range s.held {
		if !hm.claimed && (take == nil || take(hm)) {
			hm.claimed = true
			out = append(out, hm)
		}
	}
	return out
}

// unclaim gives hm, claimed by a call that went away, back to the held
// set; a spilled one keeps only its head in memory again.
func (s *heldSet) unclaim(hm *heldMsg) {
	hm.claimed = false
	if hm.seq != 0 {
		hm.env = nil // back on disk only
	}
}

// unclaimedHeld counts the held messages no call has taken.
func (s *heldSet) unclaimedHeld() int {
	n := 0
	for _, hm := range s.held {
		if !hm.claimed {
			n++
		}
	}
	return n
}

// claimedHeld counts the held messages a call (or a removal) has taken
// and not settled yet.
func (s *heldSet) claimedHeld() int { return len(s.held) - s.unclaimedHeld() }

// claimedCopies counts the claimed held messages whose transport copy is
// still unacked (not spilled): what a transport's count of the inbox
// includes on their account.
func (s *heldSet) claimedCopies() int {
	n := 0
	for _, hm := range s.held {
		if hm.claimed && hm.acks != nil {
			n++
		}
	}
	return n
}

// internFrom returns the entity's one copy of sender gid from: a backlog
// from one chatty sender keeps one string, not one per message.
func (s *heldSet) internFrom(from string) string {
	if v, ok := s.froms[from]; ok {
		return v
	}
	if s.froms == nil {
		s.froms = map[string]string{}
	}
	s.froms[from] = from
	return from
}

// nextUnwritten is the oldest held message that still needs the store,
// nil when none does; the settled, written or queued ones before it leave
// the unwritten list.
func (s *heldSet) nextUnwritten() *heldMsg {
	for len(s.unwritten) > 0 {
		hm := s.unwritten[0]
		if !hm.settled && hm.seq == 0 && !hm.spilling {
			return hm
		}
		s.popUnwritten()
	}
	return nil
}

func (s *heldSet) popUnwritten() {
	s.unwritten[0] = nil
	s.unwritten = s.unwritten[1:]
}

// startSpill queues hm, the head nextUnwritten returned, for the store:
// from now on it counts as stored.
func (s *heldSet) startSpill(hm *heldMsg) {
	hm.spilling = true
	s.stored++
	s.popUnwritten()
}

// unspill puts hms, queued for the store and not written, back at the
// front of the unwritten list in their order, so a retry writes them
// first; those settled or written meanwhile stay as they are.
func (s *heldSet) unspill(hms []*heldMsg) {
	var back []*heldMsg
	for _, hm := range hms {
		if hm.spilling && !hm.settled && hm.seq == 0 {
			hm.spilling = false
			s.stored--
			back = append(back, hm)
		}
	}
	s.unwritten = append(back, s.unwritten...)
}
