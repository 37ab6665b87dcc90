package memnet

import (
	"fmt"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// consumer is one manual-ack consumer of a queue: a goroutine that hands
// at most prefetch messages to its handler, one at a time. It is attached
// to its queue while its connection's link is up, and re-attached (the
// queue re-declared first, when it has a declare) when the link comes back.
type consumer struct {
	n         *Network
	t         *Transport
	queue     string
	prefetch  int
	exclusive bool
	declare   func() error // under n.mu: (re)declares the queue before attaching
	deliver   func(message, bridge.Acker)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// under n.mu
	q        *queue
	attached bool
	gen      uint64 // attach generation: an acker of an older one is void
	unacked  map[uint64]*message
}

func (t *Transport) newConsumer(queue string, prefetch int, exclusive bool) *consumer {
	return &consumer{n: t.n, t: t, queue: queue, prefetch: max(prefetch, 1), exclusive: exclusive,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), unacked: map[uint64]*message{}}
}

func (c *consumer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// attachLocked makes c a consumer of its queue: refused when the queue is
// gone, or when exclusivity forbids (an exclusive consumer is alone).
func (n *Network) attachLocked(c *consumer) error {
	q := n.queues[c.queue]
	if q == nil {
		return fmt.Errorf("memnet: no queue %s", c.queue)
	}
	for _, o := range q.cons {
		if c.exclusive || o.exclusive {
			return fmt.Errorf("%w: %s is consumed by another gateway: is a second gateway running with the same host id?", bridge.ErrConsumerExists, c.queue)
		}
	}
	q.cons = append(q.cons, c)
	c.q, c.attached = q, true
	c.gen++
	c.poke()
	return nil
}

// detachLocked takes c off its queue: what it held unsettled goes back,
// redelivered; its ackers are void. An auto-delete queue left without
// consumers is deleted.
func (n *Network) detachLocked(c *consumer) {
	if !c.attached {
		return
	}
	q := c.q
	c.q, c.attached = nil, false
	c.gen++
	for i, o := range q.cons {
		if o == c {
			q.cons = append(q.cons[:i], q.cons[i+1:]...)
			break
		}
	}
	held := make([]*message, 0, len(c.unacked))
	for _, m := range c.unacked {
		held = append(held, m)
	}
	clear(c.unacked)
	n.requeueLocked(q, held)
	if q.autoDelete && len(q.cons) == 0 {
		n.dropQueueLocked(q)
	}
}

// take hands out the next ready message, if the prefetch window has room.
// An expired one met on the way is dead-lettered instead.
func (c *consumer) take() (message, *acker, bool) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	q := c.q
	if !c.attached || len(c.unacked) >= c.prefetch {
		return message{}, nil, false
	}
	now := time.Now()
	for len(q.ready) > 0 {
		m := q.ready[0]
		q.ready[0] = nil
		q.ready = q.ready[1:]
		if expired(m, now) {
			c.n.deadLetterLocked(q, m, bridge.ReasonExpired)
			continue
		}
		c.unacked[m.seq] = m
		return *m, &acker{c: c, seq: m.seq, gen: c.gen}, true
	}
	return message{}, nil, false
}

func (c *consumer) run() {
	defer close(c.done)
	for {
		for {
			select {
			case <-c.stop:
				c.exit()
				return
			default:
			}
			m, a, ok := c.take()
			if !ok {
				break
			}
			c.deliver(m, a)
		}
		select {
		case <-c.stop:
			c.exit()
			return
		case <-c.wake:
		}
	}
}

func (c *consumer) exit() {
	c.n.mu.Lock()
	c.n.detachLocked(c)
	delete(c.t.consumers, c)
	c.n.mu.Unlock()
}

// Cancel implements bridge.Subscription: unsettled deliveries go back to
// the queue. It waits for the handler (bounded, like the broker's, so a
// handler that cancels its own subscription does not hang forever).
func (c *consumer) Cancel() {
	c.once.Do(func() { close(c.stop) })
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
}

// acker settles one delivery, once, as its channel allows: after the
// consumer detached (cancelled, or its link dropped) the tag is void and
// the message is delivered again.
type acker struct {
	c    *consumer
	seq  uint64
	gen  uint64
	once sync.Once
	err  error
}

func (a *acker) Ack() error {
	a.once.Do(func() { a.err = a.settle(false) })
	return a.err
}

// Reject dead-letters; as on the broker, the dead letter says only
// "rejected" (the core logs why).
func (a *acker) Reject(string) error {
	a.once.Do(func() { a.err = a.settle(true) })
	return a.err
}

func (a *acker) settle(reject bool) error {
	c := a.c
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	m := c.unacked[a.seq]
	// a closed connection acks nothing, as on the broker, even while a
	// handler of it is still running: what it held goes back (Close)
	if !c.attached || c.gen != a.gen || m == nil || c.t.closed {
		return errVoid
	}
	delete(c.unacked, a.seq)
	if reject {
		c.n.deadLetterLocked(c.q, m, bridge.ReasonRejected)
	}
	c.poke()
	return nil
}
