package split

import (
	"context"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Orphans: the broker side of an inbox closed or deleted while the broker
// was unreachable. Its broker queue stays bound, so what other hosts
// publish to it meanwhile, or spooled during the outage and publish when
// they are back, lands there with nobody to consume it: its senders were
// told nothing until its TTL dead-lettered it (or, on RabbitMQ, x-expires
// deleted the queue with it). When the broker returns the attacher
// finishes the job as a connected close would have: it closes the queue
// (so later arrivals are unroutable and their publishers report them),
// consumes what waits there with the inbox's last handler — the core
// finds its entity gone and tells each sender FAILED — and deletes it once
// it is empty.

// orphanDrainBound is how long the attacher waits for an orphan queue's
// messages to be reported before it leaves the rest to their TTL.
const orphanDrainBound = 10 * time.Second

// orphan records gid's broker side for the attacher, with the handler
// that consumed it last (nil after a restart: what waits is left to its
// TTL then).
func (t *Transport) orphan(gid string) {
	t.amu.Lock()
	defer t.amu.Unlock()
	if _, ok := t.orphans[gid]; !ok {
		t.orphans[gid] = t.handlers[gid]
	}
	t.startAttacherLocked()
}

// isOrphan reports whether gid's broker side waits for the attacher.
func (t *Transport) isOrphan(gid string) bool {
	t.amu.Lock()
	defer t.amu.Unlock()
	_, ok := t.orphans[gid]
	return ok
}

// settleOrphans closes, empties and deletes the orphan queues it can now.
func (t *Transport) settleOrphans() {
	t.amu.Lock()
	orphans := make(map[string]func(bridge.Delivery), len(t.orphans))
	for gid, h := range t.orphans {
		orphans[gid] = h
	}
	t.amu.Unlock()
	for gid, h := range orphans {
		if !t.settleOrphan(gid, h) {
			continue
		}
		t.amu.Lock()
		delete(t.orphans, gid)
		t.amu.Unlock()
	}
}

// settleOrphan is one orphan queue; false: try again later.
func (t *Transport) settleOrphan(gid string, h func(bridge.Delivery)) bool {
	queue := t.InboxQueue(gid)
	n, err := t.closeRemote(gid)
	if err != nil {
		t.log.Warn("closing the broker queue of an inbox removed during an outage failed; retrying", "queue", queue, "err", err)
		return false
	}
	if n > 0 && h == nil {
		t.log.Warn("the broker queue of an inbox removed during an outage holds messages and no handler is left to report them: closed, left to its TTL (dead-lettered and reported then)", "queue", queue, "messages", n)
		return true
	}
	if n > 0 && !t.drainOrphan(gid, h) {
		return false
	}
	err = t.bounded(context.Background(), func(ctx context.Context) error { return t.remote.DeleteInbox(ctx, gid) })
	if err != nil {
		t.log.Warn("deleting the broker queue of an inbox removed during an outage failed; retrying", "queue", queue, "err", err)
		return false
	}
	t.log.Info("the broker queue of an inbox removed during an outage is closed and deleted", "queue", queue, "reported", n)
	return true
}

func (t *Transport) closeRemote(gid string) (n int, err error) {
	err = t.bounded(context.Background(), func(ctx context.Context) (err error) { n, err = t.remote.CloseInbox(ctx, gid); return err })
	return n, err
}

// drainOrphan consumes gid's closed broker queue with h until it is empty
// (true) or orphanDrainBound passed (what is left waits for its TTL: also
// true); false: it could not consume it now.
func (t *Transport) drainOrphan(gid string, h func(bridge.Delivery)) bool {
	var rs bridge.Subscription
	err := t.bounded(context.Background(), func(ctx context.Context) (err error) {
		rs, err = t.remote.Consume(ctx, gid, 16, h)
		return err
	})
	if err != nil {
		t.log.Warn("consuming the broker queue of an inbox removed during an outage failed; retrying", "queue", t.InboxQueue(gid), "err", err)
		return false
	}
	defer rs.Cancel()
	deadline := time.Now().Add(orphanDrainBound)
	for time.Now().Before(deadline) {
		select {
		case <-t.stop:
			return false
		case <-time.After(t.opts.RetryEvery):
		}
		if n, err := t.closeRemote(gid); err == nil && n == 0 {
			return true
		}
	}
	t.log.Warn("the broker queue of an inbox removed during an outage was not emptied in time: the rest is left to its TTL", "queue", t.InboxQueue(gid))
	return true
}
