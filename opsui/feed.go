package opsui

import (
	"errors"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// The live feed: every hop the core observes becomes one Item in a ring
// of fixed size. Subscribers (the page's event streams) hold only a
// cursor into it and a wake-up channel of one slot, so a slow or stalled
// browser costs the gateway nothing that grows: when its cursor falls
// behind the ring's oldest item, it is told how many it missed. Observe is
// called on the core's goroutines, some holding an entity's lock: it takes
// only the feed's own leaf lock and never blocks.

// Item is one hop of one message, as the page shows it: metadata only.
// From and To are gids; the page's writers add the names.
type Item struct {
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	Hop       string    `json:"hop"`
	Kind      string    `json:"kind,omitempty"`
	MsgID     string    `json:"msgId,omitempty"`
	TraceID   string    `json:"traceId,omitempty"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	FromName  string    `json:"fromName,omitempty"`
	ToName    string    `json:"toName,omitempty"`
	Host      string    `json:"host,omitempty"` // the sending host
	Status    string    `json:"status,omitempty"`
	LatencyMs *float64  `json:"latencyMs,omitempty"`
}

// Feed sizes.
const (
	DefaultFeedSize    = 1024 // items kept for the page (a few KiB each at most)
	DefaultRefusalKeep = 50   // the latest refusals, kept apart so traffic does not push them out
	DefaultMaxStreams  = 64   // open event streams at once (every tab holds one, or shares its leader's)
)

// ErrTooManyStreams is Subscribe's answer past MaxStreams.
var ErrTooManyStreams = errors.New("opsui: too many open operator pages on this gateway: close some tabs")

// Feed is the ring of recent hops and the subscribers reading it. Its
// zero value is not usable: NewFeed.
type Feed struct {
	mu       sync.Mutex
	ring     []Item
	next     uint64 // seq of the next item; the first is 1
	refusals []Item // the latest refusals, oldest first, at most refusalKeep
	keep     int
	subs     map[*Sub]struct{}
	maxSubs  int
}

var _ bridge.Observer = (*Feed)(nil)

// NewFeed makes a feed keeping size items (<= 0: DefaultFeedSize) for at
// most maxStreams subscribers (<= 0: DefaultMaxStreams).
func NewFeed(size, maxStreams int) *Feed {
	if size <= 0 {
		size = DefaultFeedSize
	}
	if maxStreams <= 0 {
		maxStreams = DefaultMaxStreams
	}
	return &Feed{ring: make([]Item, size), next: 1, keep: DefaultRefusalKeep, subs: map[*Sub]struct{}{}, maxSubs: maxStreams}
}

// Sub is one subscriber: it is woken (at most one wake-up pending) when
// items arrive, and reads them with Since.
type Sub struct {
	wake chan struct{}
}

// Wake is signalled when new items may be there.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

// Observe records e. It never blocks: a subscriber already woken is not
// woken twice.
func (f *Feed) Observe(e bridge.Event) {
	it := itemOf(e)
	f.mu.Lock()
	defer f.mu.Unlock()
	it.Seq = f.next
	f.next++
	f.ring[it.Seq%uint64(len(f.ring))] = it
	if e.Hop == bridge.HopRefuse {
		if len(f.refusals) == f.keep {
			copy(f.refusals, f.refusals[1:])
			f.refusals = f.refusals[:f.keep-1]
		}
		f.refusals = append(f.refusals, it)
	}
	for s := range f.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func itemOf(e bridge.Event) Item {
	it := Item{At: e.At.UTC(), Hop: string(e.Hop), Kind: string(e.Kind), MsgID: e.MsgID, TraceID: e.TraceID,
		From: e.From, To: e.To, Host: e.Host, Status: e.Status}
	if it.To == "" {
		it.To = e.Entity
	}
	if e.Latency > 0 {
		ms := float64(e.Latency.Microseconds()) / 1000
		it.LatencyMs = &ms
	}
	return it
}

// Subscribe adds a subscriber, or fails with ErrTooManyStreams.
func (f *Feed) Subscribe() (*Sub, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= f.maxSubs {
		return nil, ErrTooManyStreams
	}
	s := &Sub{wake: make(chan struct{}, 1)}
	f.subs[s] = struct{}{}
	return s, nil
}

// Unsubscribe removes s.
func (f *Feed) Unsubscribe(s *Sub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
}

// Streams is how many subscribers there are.
func (f *Feed) Streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Last is the seq of the newest item (0: none yet).
func (f *Feed) Last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next - 1
}

// Since returns up to max items after seq after, oldest first, and how
// many items after it are no longer in the ring (missed: the reader was
// too slow, or asked for more than the ring keeps).
func (f *Feed) Since(after uint64, max int) (items []Item, missed uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.next - 1
	if after >= last {
		return nil, 0
	}
	oldest := uint64(1)
	if n := uint64(len(f.ring)); last >= n {
		oldest = last - n + 1
	}
	from := after + 1
	if from < oldest {
		missed, from = oldest-from, oldest
	}
	for seq := from; seq <= last && len(items) < max; seq++ {
		items = append(items, f.ring[seq%uint64(len(f.ring))])
	}
	return items, missed
}

// Refusals returns the latest refusals, newest first.
func (f *Feed) Refusals() []Item {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Item, len(f.refusals))
	for i, it := range f.refusals {
		out[len(out)-1-i] = it
	}
	return out
}
