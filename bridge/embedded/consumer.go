package embedded

import (
	"context"
	"sync"
	"time"
)

// consumer is one attached reader of a queue: a cursor over the queue's
// sequence numbers and the set of deliveries not yet settled.
type consumer struct {
	prefetch int
	wake     chan struct{}
	done     chan struct{}
	stopped  chan struct{}
	onCancel func()
	once     sync.Once

	mu      sync.Mutex
	cur     uint64 // highest sequence handed out
	unacked map[uint64]bool
}

func newConsumer(prefetch int) *consumer {
	return &consumer{
		prefetch: prefetch,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
		unacked:  map[uint64]bool{},
	}
}

func (c *consumer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *consumer) room() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prefetch - len(c.unacked)
}

// outstanding is how many deliveries are neither acked nor rejected.
func (c *consumer) outstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unacked)
}

func (c *consumer) cursor() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

func (c *consumer) advance(seq uint64) {
	c.mu.Lock()
	if seq > c.cur {
		c.cur = seq
	}
	c.mu.Unlock()
}

func (c *consumer) hold(seq uint64) {
	c.mu.Lock()
	c.unacked[seq] = true
	c.mu.Unlock()
}

func (c *consumer) release(seq uint64) {
	c.mu.Lock()
	had := c.unacked[seq]
	delete(c.unacked, seq)
	c.mu.Unlock()
	if had {
		c.poke()
	}
}

// run calls deliver whenever poked (and once a second, so TTL acts on a
// quiet queue) until cancelled.
func (c *consumer) run(ctx context.Context, deliver func() bool) {
	defer close(c.stopped)
	// detach only once deliver can no longer run, so whoever sees the queue
	// without a consumer (the TTL sweeper, the next Consume) cannot race it
	defer func() {
		if c.onCancel != nil {
			c.onCancel()
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	c.poke()
	for {
		select {
		case <-ctx.Done():
			c.shut()
			return
		case <-c.done:
			return
		case <-c.wake:
		case <-tick.C:
		}
		for deliver() {
			select {
			case <-c.done:
				return
			default:
			}
		}
	}
}

func (c *consumer) shut() {
	c.once.Do(func() { close(c.done) })
}

// Cancel implements bridge.Subscription.
func (c *consumer) Cancel() {
	c.shut()
	select {
	case <-c.stopped:
	case <-time.After(5 * time.Second):
	}
}
