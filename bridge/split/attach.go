package split

import (
	"context"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// inboxSub is the consumer of one inbox: its local side from the start,
// its broker side once the broker has it (at once, or when the broker
// returns after an outage).
type inboxSub struct {
	t        *Transport
	gid      string
	prefetch int
	h        func(bridge.Delivery)
	local    bridge.Subscription

	mu       sync.Mutex
	remote   bridge.Subscription
	canceled bool
}

// Cancel implements bridge.Subscription.
func (s *inboxSub) Cancel() {
	s.t.amu.Lock()
	delete(s.t.attaches, s)
	s.t.amu.Unlock()
	s.mu.Lock()
	s.canceled = true
	r := s.remote
	s.mu.Unlock()
	if r != nil {
		r.Cancel()
	}
	s.local.Cancel()
}

// attach sets the broker side; false if s was cancelled meanwhile (the
// caller cancels r).
func (s *inboxSub) attach(r bridge.Subscription) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.canceled {
		return false
	}
	s.remote = r
	return true
}

// later records what the broker must still do for gid — declare its
// inbox (spec), attach its consumer (s) — and starts the attacher.
func (t *Transport) later(gid string, spec *bridge.InboxSpec, s *inboxSub) {
	t.amu.Lock()
	defer t.amu.Unlock()
	if spec != nil {
		t.declares[gid] = *spec
	}
	if s != nil {
		t.attaches[s] = true
	}
	t.log.Warn("broker unreachable: the inbox works on this host now, its broker side follows when the broker returns", "queue", t.InboxQueue(gid))
	t.startAttacherLocked()
}

// startAttacherLocked starts the attacher unless it runs (t.amu held).
func (t *Transport) startAttacherLocked() {
	if t.attaching {
		return
	}
	t.mu.Lock() // Close sets closed under it, then waits: no Add after that
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.attaching = true
	t.attachWG.Add(1)
	go t.attacher()
}

// forget drops what was pending for a deleted inbox.
func (t *Transport) forget(gid string) {
	t.amu.Lock()
	defer t.amu.Unlock()
	delete(t.declares, gid)
}

// declaresDone reports whether no inbox has a declare pending.
func (t *Transport) declaresDone() bool {
	t.amu.Lock()
	defer t.amu.Unlock()
	return len(t.declares) == 0
}

// declaredRemote reports whether gid's inbox has no declare pending.
func (t *Transport) declaredRemote(gid string) bool {
	t.amu.Lock()
	defer t.amu.Unlock()
	_, pending := t.declares[gid]
	return !pending
}

// attacher does what later recorded, once the broker is back, until
// nothing is pending or the transport closes.
func (t *Transport) attacher() {
	defer t.attachWG.Done()
	for {
		select {
		case <-t.stop:
			return
		case <-time.After(t.opts.RetryEvery):
		}
		if !t.remote.Connected() {
			continue
		}
		if t.attachPending() {
			return
		}
	}
}

// attachPending declares and attaches what is pending; true when nothing
// is left (and the attacher has stopped: a later call starts another).
func (t *Transport) attachPending() bool {
	t.amu.Lock()
	declares := make(map[string]bridge.InboxSpec, len(t.declares))
	for gid, spec := range t.declares {
		declares[gid] = spec
	}
	t.amu.Unlock()
	for gid, spec := range declares {
		err := t.bounded(context.Background(), func(ctx context.Context) error { return t.remote.DeclareInbox(ctx, gid, spec) })
		if err != nil {
			t.log.Warn("declaring an inbox on the broker failed; retrying", "queue", t.InboxQueue(gid), "err", err)
			continue
		}
		t.amu.Lock()
		if cur, ok := t.declares[gid]; ok && sameSpec(cur, spec) {
			delete(t.declares, gid)
		}
		t.amu.Unlock()
	}
	// after the declares: the outbox waits for those (pump.go
	// awaitDeclares), and an orphan's drain can take its whole bound
	t.settleOrphans()
	t.amu.Lock()
	var subs []*inboxSub
	for s := range t.attaches {
		if _, pending := t.declares[s.gid]; !pending {
			subs = append(subs, s)
		}
	}
	t.amu.Unlock()
	for _, s := range subs {
		t.attachOne(s)
	}
	t.amu.Lock()
	defer t.amu.Unlock()
	if len(t.declares) == 0 && len(t.attaches) == 0 && len(t.orphans) == 0 {
		t.attaching = false
		return true
	}
	return false
}

func (t *Transport) attachOne(s *inboxSub) {
	var rs bridge.Subscription
	err := t.bounded(context.Background(), func(ctx context.Context) (err error) {
		rs, err = t.remote.Consume(ctx, s.gid, s.prefetch, s.h)
		return err
	})
	if err != nil {
		t.log.Warn("attaching an inbox's broker consumer failed; retrying", "queue", t.InboxQueue(s.gid), "err", err)
		return
	}
	t.amu.Lock()
	delete(t.attaches, s)
	t.amu.Unlock()
	if !s.attach(rs) {
		rs.Cancel()
		return
	}
	t.log.Info("inbox attached on the broker after an outage", "queue", t.InboxQueue(s.gid))
}

func sameSpec(a, b bridge.InboxSpec) bool {
	if a.MaxLength != b.MaxLength || a.MessageTTL != b.MessageTTL || a.Expires != b.Expires || len(a.Groups) != len(b.Groups) {
		return false
	}
	for i := range a.Groups {
		if a.Groups[i] != b.Groups[i] {
			return false
		}
	}
	return true
}
