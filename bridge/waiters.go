package bridge

import "time"

// waiter is an open blocking call of an entity that one arriving message
// resolves.
type waiter struct {
	accept func(*Envelope) bool
	ch     chan *heldMsg // capacity 1: exactly one message resolves a waiter
	gone   bool
	isSend bool
	onHeld func() // an open send is told when something else is held
}

// waitList is the part of an entity's record that says who hears of an
// arrival: its open waiters, in the order they opened, and when its
// sessions were last nudged about held messages (nudge.go). Its entState's
// mu guards it; every method runs with mu held. It owns the rule that a
// waiter leaves the list exactly when it is marked gone, by a message or
// by its own end (endWaiters, at Close, only marks them).
type waitList struct {
	waiters   []*waiter
	lastNudge time.Time
}

// match hands hm to the first waiter that accepts it.
func (l *waitList) match(hm *heldMsg) bool {
	var scratch Envelope
	for i, w := range l.waiters {
		if w.gone || !w.accept(hm.view(&scratch)) {
			continue
		}
		l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
		w.gone = true
		hm.claimed = true
		w.ch <- hm
		return true
	}
	return false
}

// addWaiter opens w.
func (l *waitList) addWaiter(w *waiter) { l.waiters = append(l.waiters, w) }

func (l *waitList) removeWaiter(w *waiter) {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			break
		}
	}
	w.gone = true
}

// endWaiters marks every open waiter gone (the core is closing): no
// message resolves one any more.
func (l *waitList) endWaiters() {
	for _, w := range l.waiters {
		w.gone = true
	}
}

// dropWaiters ends every open waiter and forgets them (the entity is being
// removed): open calls run out on their own timers.
func (l *waitList) dropWaiters() {
	l.endWaiters()
	l.waiters = nil
}

// tellSend tells an open send, if there is one, that something else is
// held, and reports whether it did.
func (l *waitList) tellSend() bool {
	for _, w := range l.waiters {
		if w.isSend && w.onHeld != nil {
			w.onHeld()
			return true
		}
	}
	return false
}

// nudged records that the entity's sessions were nudged at now.
func (l *waitList) nudged(now time.Time) { l.lastNudge = now }
