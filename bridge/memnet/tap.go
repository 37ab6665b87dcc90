package memnet

import (
	"fmt"
	"maps"
)

// Tap is a queue of an outsider's own bound to one exchange and key: what
// anyone with access to a broker can declare to capture real signed
// messages and replay them (the attack suite's spy). It takes copies and
// takes nothing from the gateways' queues; nobody consumes it, nothing
// dead-letters from it.
type Tap struct {
	n *Network
	q *queue
}

// Tap binds a new tap queue to ex with key.
func (n *Network) Tap(ex Exchange, key string) (*Tap, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := exchangeKinds[ex]; !ok {
		return nil, fmt.Errorf("memnet: no exchange %q", ex)
	}
	n.seq++
	q := n.declareLocked(fmt.Sprintf("tap.%d", n.seq), queueArgs{}, nil)
	n.bindLocked(ex, key, q)
	return &Tap{n: n, q: q}, nil
}

// Get takes the oldest message the tap holds, raw: its headers and body
// as published (ok false: none yet).
func (t *Tap) Get() (headers map[string]any, body []byte, ok bool) {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	if len(t.q.ready) == 0 {
		return nil, nil, false
	}
	m := t.q.ready[0]
	t.q.ready[0] = nil // the array outlives the slice: its slot would keep the message
	t.q.ready = t.q.ready[1:]
	return maps.Clone(m.headers), clone(m.body), true
}

// Close deletes the tap queue. Idempotent.
func (t *Tap) Close() {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	t.n.dropQueueLocked(t.q)
}
