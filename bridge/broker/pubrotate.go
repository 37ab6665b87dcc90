package broker

import (
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A quorum queue's client lives in the channel that publishes to it: the
// channel registers as an enqueuer with the leader it knows when it first
// publishes to the queue. A channel that first published while the
// queue's leader had just died — its node killed, the failover to another
// node quicker than the election — can keep that dead leader: RabbitMQ
// 3.10.8 then nacked every publish on it until the killed node came back
// (17 s and 44 s in TestClusterNodeKill: the gateway's connection and the
// inbox's leader on the killed node), while a new channel on the same
// connection, publishing to the same queue in the same seconds, was
// confirmed at once (a probe beside the test: 160 of 160). So a publish
// channel that a quorum inbox below its cap keeps nacking for
// quorumRotateAfter is replaced by a new one; the old one is closed
// oldPubGrace later, once what is in flight on it has settled.
const (
	quorumRotateAfter = time.Second
	oldPubGrace       = 10 * time.Second
	maxNackRuns       = 1024 // inboxes followed at once; past it a run is not followed
)

// nackRuns follows, per inbox key, how long a quorum inbox below its cap
// has been nacking publishes without a confirm in between. It has its own
// lock: the confirm path touches it only while some run is open.
type nackRuns struct {
	mu    sync.Mutex
	since map[string]time.Time // key -> first below-cap nack since its last confirm
	open  atomic.Int32         // len(since): confirmed's fast path reads it without the lock
}

// confirmed ends key's run: the inbox took a publish.
func (r *nackRuns) confirmed(key string) {
	if r.open.Load() == 0 {
		return // no run open: the common case, no lock on the confirm path
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.since[key]; ok {
		delete(r.since, key)
		r.open.Add(-1)
	}
}

// nacked records a below-cap nack of key at now and reports whether the
// run has lasted quorumRotateAfter: the publish channel should be
// replaced. A run that asked restarts, so a channel is replaced at most
// once per quorumRotateAfter per inbox.
func (r *nackRuns) nacked(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = map[string]time.Time{}
	}
	start, ok := r.since[key]
	if !ok {
		if len(r.since) < maxNackRuns {
			r.since[key] = now
			r.open.Add(1)
		}
		return false
	}
	if now.Sub(start) < quorumRotateAfter {
		return false
	}
	r.since[key] = now
	return true
}

// askRotate asks the connection's publish watcher to replace pub, unless
// a request is already waiting.
func (t *Transport) askRotate(pub *amqp.Channel) {
	t.mu.Lock()
	rotate := t.rotate
	t.mu.Unlock()
	select {
	case rotate <- pub:
	default:
	}
}

// rotatePublish replaces the publish channel old of conn with a new one
// (watchPublish's, which owns the channel's lifecycle) and returns the
// new one's close notice; nil with ok when old is no longer the current
// channel; !ok when no channel could be opened (the connection is closed
// for the supervisor to reconnect).
func (t *Transport) rotatePublish(conn *amqp.Connection, old *amqp.Channel) (closed chan *amqp.Error, ok bool) {
	t.mu.Lock()
	current := t.conn == conn && t.pub == old
	t.mu.Unlock()
	if !current || conn.IsClosed() {
		return nil, true
	}
	pub, returns, c, err := openPublish(conn)
	if err != nil {
		t.log.Warn("opening a new publish channel failed; reconnecting", "err", err)
		conn.Close()
		return nil, false
	}
	t.mu.Lock()
	oldReturns := t.returns
	t.pub, t.returns = pub, returns
	t.retired = append(t.retired, oldReturns)
	t.mu.Unlock()
	t.counts.rotations.Add(1)
	t.log.Warn("a quorum inbox kept refusing publishes on this channel while below its cap (the channel may follow a dead leader): publishing on a new channel",
		"node", t.Server().Node, "after", quorumRotateAfter)
	time.AfterFunc(oldPubGrace, func() { _ = old.Close() })
	return c, true
}
