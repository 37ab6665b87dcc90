package memnet

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// queueArgs are a queue's declared arguments. Declaring an existing queue
// with other arguments is refused, as RabbitMQ refuses it
// (PRECONDITION_FAILED).
type queueArgs struct {
	maxLen     int           // x-max-length over ready messages (0: none)
	dropHead   bool          // overflow drops the oldest (bridge.dlq); else the publish is refused and dead-lettered (reject-publish-dlx)
	ttl        time.Duration // x-message-ttl (0: none)
	expires    time.Duration // x-expires: recorded, not enforced (see Transport.DeclareInbox)
	deadLetter bool          // x-dead-letter-exchange = bridge.dlx
}

type bindKey struct {
	ex  Exchange
	key string
}

// queue is one broker queue. Every field is guarded by Network.mu.
type queue struct {
	name       string
	args       queueArgs
	owner      *Transport // an exclusive queue's connection; it dies with it
	autoDelete bool       // deleted when its last consumer goes
	ready      []*message // in sequence order; handed-out ones are in their consumer's unacked
	cons       []*consumer
	bound      map[bindKey]bool
	deleted    bool

	timer    *time.Timer // fires at timerAt: the earliest expiry among ready messages
	timerAt  time.Time
	timerGen uint64
}

// message is one copy of a publish, in one queue.
type message struct {
	seq         uint64
	headers     map[string]any
	body        []byte
	key         string // routing key it was published with
	id          string // the message-id property (the publisher's msgId; empty on a raw publish)
	ttl         time.Duration
	hasTTL      bool      // per-message expiration (heartbeats)
	expires     time.Time // set when enqueued: the earlier of the queue's and the message's TTL
	redelivered bool
}

func (m *message) copy() *message {
	c := *m
	c.headers = maps.Clone(m.headers)
	return &c
}

func (n *Network) declareLocked(name string, args queueArgs, owner *Transport) *queue {
	q := &queue{name: name, args: args, owner: owner, autoDelete: owner != nil, bound: map[bindKey]bool{}}
	n.queues[name] = q
	return q
}

// dropQueueLocked deletes q with its bindings and contents. Its consumers
// stay attached to nothing until they are cancelled.
func (n *Network) dropQueueLocked(q *queue) {
	if q.deleted {
		return
	}
	q.deleted = true
	for b := range q.bound {
		n.unbindLocked(b.ex, b.key, q)
	}
	if n.queues[q.name] == q {
		delete(n.queues, q.name)
	}
	q.ready = nil
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// enqueueLocked appends m to q, or, at q's cap, dead-letters it (reports
// false) or drops q's oldest to make room, as q's overflow says.
func (n *Network) enqueueLocked(q *queue, m *message) bool {
	if q.args.maxLen > 0 && len(q.ready) >= q.args.maxLen {
		if !q.args.dropHead {
			n.deadLetterLocked(q, m, bridge.ReasonMaxLen)
			return false
		}
		old := q.ready[0]
		q.ready[0] = nil // the array outlives the slice: its slot would keep the message
		q.ready = q.ready[1:]
		n.deadLetterLocked(q, old, bridge.ReasonMaxLen)
		n.log.Warn("queue at its cap: the oldest message was dropped", "queue", q.name, "msgId", old.id)
	}
	n.seq++
	m.seq = n.seq
	now := time.Now()
	if q.args.ttl > 0 {
		m.expires = now.Add(q.args.ttl)
	}
	if m.hasTTL && (m.expires.IsZero() || now.Add(m.ttl).Before(m.expires)) {
		m.expires = now.Add(m.ttl)
	}
	q.ready = append(q.ready, m)
	n.armLocked(q, m.expires)
	wakeAll(q)
	return true
}

// requeueLocked puts messages handed out and not settled back in their
// place, marked redelivered.
func (n *Network) requeueLocked(q *queue, ms []*message) {
	if q.deleted || len(ms) == 0 {
		return
	}
	for _, m := range ms {
		m.redelivered = true
		i, _ := slices.BinarySearchFunc(q.ready, m.seq, func(r *message, seq uint64) int { return cmp.Compare(r.seq, seq) })
		q.ready = slices.Insert(q.ready, i, m)
		n.armLocked(q, m.expires)
	}
	wakeAll(q)
}

func wakeAll(q *queue) {
	for _, c := range q.cons {
		c.poke()
	}
}

func expired(m *message, now time.Time) bool { return !m.expires.IsZero() && !now.Before(m.expires) }

// armLocked makes q's timer fire by at (zero: nothing to expire).
func (n *Network) armLocked(q *queue, at time.Time) {
	if at.IsZero() || q.deleted || q.timer != nil && !q.timerAt.After(at) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.timerGen++
	gen := q.timerGen
	q.timerAt = at
	q.timer = time.AfterFunc(time.Until(at), func() { n.expire(q, gen) })
}

// expire dead-letters q's ready messages past their TTL (delivered,
// unsettled ones stay, as on the broker) and re-arms the timer.
func (n *Network) expire(q *queue, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if q.deleted || q.timerGen != gen {
		return
	}
	q.timer, q.timerAt = nil, time.Time{}
	now := time.Now()
	var next time.Time
	keep := q.ready[:0]
	for _, m := range q.ready {
		if expired(m, now) {
			n.deadLetterLocked(q, m, bridge.ReasonExpired)
			continue
		}
		keep = append(keep, m)
		if !m.expires.IsZero() && (next.IsZero() || m.expires.Before(next)) {
			next = m.expires
		}
	}
	clear(q.ready[len(keep):])
	q.ready = keep
	n.armLocked(q, next)
}
