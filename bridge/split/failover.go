package split

import (
	"context"
	"time"
)

// defaultFailoverGrace is how long a send waits for a link that has just
// gone down before it is spooled (Options.FailoverGrace).
const defaultFailoverGrace = time.Second

// awaitFailover waits, briefly, for a link that has just gone down to come
// back, and reports whether it is up. A broker node failing over (a
// rolling restart, a killed node) is back within a fraction of a second;
// a send spooled in that moment would put every later send behind the
// outbox, whose pump publishes one message at a time — the cluster tests
// saw confirms stop for 18 s after a 70 ms failover. A link down for longer
// than the grace is an outage: sends then spool at once.
func (t *Transport) awaitFailover(ctx context.Context) bool {
	deadline := t.downDeadline()
	for !t.remote.Connected() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(wait, 10*time.Millisecond)):
		}
	}
	t.linkSeenUp()
	return true
}

// downDeadline is the end of the grace of the link's current loss, which
// starts when a send first finds it down.
func (t *Transport) downDeadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.downSince.IsZero() {
		t.downSince = time.Now()
	}
	return t.downSince.Add(t.opts.FailoverGrace)
}

// linkSeenUp ends the current loss: the next one gets a grace of its own.
func (t *Transport) linkSeenUp() {
	t.mu.Lock()
	t.downSince = time.Time{}
	t.mu.Unlock()
}

// outboxEmpty reports whether no message waits in the outbox: only then
// can a send go straight to the broker, so only then is a grace worth
// waiting.
func (t *Transport) outboxEmpty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spooled == 0
}
