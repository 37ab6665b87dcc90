package mcp

// A bounded event store for streamable HTTP resumability.
//
// mcp-go needs an event store (without one it drops notifications sent just
// before a handler returns), and once a session has received one
// notification (a nudge) it records every later response in it, tool
// results and their message bodies included, until the session ends. Its
// in-memory store keeps them all: 300 polls of 200 KB grew the live heap
// by over 100 MB. This store keeps, per session, at most maxEvents events
// and maxBytes bytes, and across all sessions at most maxTotal bytes,
// dropping the oldest first. Resuming is for a broken stream's last few
// events, not an archive: a poll's messages are acked once its response
// was written (handover) and held otherwise, so what a client can lose is
// a response written but cut on the way, after the bounds dropped it. A client
// resuming from a dropped event gets a 400 saying so (resumeGuard), never
// a replay with a silent gap: dropping oldest-first means an event still
// kept has every later event of its session kept too.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// Event store bounds (HTTPOptions overrides them).
const (
	DefaultEventsPerSession = 256
	DefaultEventBytes       = 4 << 20  // per session
	DefaultEventTotalBytes  = 64 << 20 // across sessions
)

// boundedEventStore implements server.EventStore within its bounds.
type boundedEventStore struct {
	maxEvents, maxBytes, maxTotal int

	mu       sync.Mutex
	sessions map[string]*eventLog
	fifo     []*storedEvent // every kept event in arrival order; dropped ones are skipped
	head     int            // fifo[:head] is spent
	stale    int            // dropped events in fifo[head:]
	total    int            // bytes kept across sessions
}

// eventLog is one session's kept events: events[i] has number first+i.
// Event IDs are the numbers, unique within the session.
type eventLog struct {
	first  int64
	next   int64 // the next event's number (numbers start at 1)
	events []*storedEvent
	bytes  int
}

type storedEvent struct {
	log     *eventLog
	n       int64
	stream  string
	message json.RawMessage
	dropped bool
}

func newBoundedEventStore(maxEvents, maxBytes, maxTotal int) *boundedEventStore {
	if maxEvents <= 0 {
		maxEvents = DefaultEventsPerSession
	}
	if maxBytes <= 0 {
		maxBytes = DefaultEventBytes
	}
	if maxTotal <= 0 {
		maxTotal = DefaultEventTotalBytes
	}
	return &boundedEventStore{maxEvents: maxEvents, maxBytes: maxBytes, maxTotal: maxTotal, sessions: map[string]*eventLog{}}
}

var _ server.EventStore = (*boundedEventStore)(nil)

// StoreEvent records message as the session's next event, then drops the
// oldest events (the session's, then any session's) until the bounds
// hold; an event over a bound on its own is dropped at once, its ID still
// given.
func (s *boundedEventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[sessionID]
	if l == nil {
		l = &eventLog{first: 1, next: 1}
		s.sessions[sessionID] = l
	}
	if len(message) > s.maxBytes || len(message) > s.maxTotal {
		return s.dropAtOnce(l), nil
	}
	ev := &storedEvent{log: l, n: l.next, stream: streamID, message: append(json.RawMessage(nil), message...)}
	l.next++
	l.events = append(l.events, ev)
	l.bytes += len(ev.message)
	s.total += len(ev.message)
	s.fifo = append(s.fifo, ev)
	for len(l.events) > s.maxEvents || l.bytes > s.maxBytes {
		s.dropOldest(l)
	}
	for s.total > s.maxTotal {
		s.dropOldestAnywhere()
	}
	return strconv.FormatInt(ev.n, 10), nil
}

// dropAtOnce numbers an event over a bound on its own without copying it
// (a poll result is megabytes): it is dropped, and with it, as the bounds
// would drop them to make room, every older event of its session.
func (s *boundedEventStore) dropAtOnce(l *eventLog) string {
	for len(l.events) > 0 {
		s.dropOldest(l)
	}
	n := l.next
	l.next++
	l.first = l.next
	return strconv.FormatInt(n, 10)
}

// dropOldest drops l's oldest event.
func (s *boundedEventStore) dropOldest(l *eventLog) {
	ev := l.events[0]
	l.events[0] = nil
	l.events = l.events[1:]
	l.first++
	l.bytes -= len(ev.message)
	s.total -= len(ev.message)
	ev.dropped, ev.message = true, nil
	s.stale++
	if len(l.events) == 0 {
		l.events = nil // let the backing array go
	}
	s.compact()
}

// dropOldestAnywhere drops the oldest event still kept in any session:
// always its session's oldest.
func (s *boundedEventStore) dropOldestAnywhere() {
	for s.head < len(s.fifo) {
		ev := s.fifo[s.head]
		if !ev.dropped {
			s.dropOldest(ev.log)
			return
		}
		s.fifo[s.head] = nil
		s.head++
		s.stale--
	}
}

// compact trims dropped events off the front of the arrival order, and
// rewrites it without the dropped ones once they outnumber the kept ones
// (an idle session's old event at the front holds the trimming up).
func (s *boundedEventStore) compact() {
	for s.head < len(s.fifo) && s.fifo[s.head].dropped {
		s.fifo[s.head] = nil
		s.head++
		s.stale--
	}
	live := len(s.fifo) - s.head - s.stale
	if s.stale > 64 && s.stale > live || s.head > 64 && s.head > len(s.fifo)/2 {
		kept := make([]*storedEvent, 0, live)
		for _, ev := range s.fifo[s.head:] {
			if !ev.dropped {
				kept = append(kept, ev)
			}
		}
		s.fifo, s.head, s.stale = kept, 0, 0
	}
}

// errEventDropped wraps server.ErrUnknownEventID for an event that was
// kept once and dropped to keep the bounds.
type errEventDropped struct{ id string }

func (e errEventDropped) Error() string {
	return "event " + e.id + " was dropped: " + server.ErrUnknownEventID.Error()
}
func (e errEventDropped) Unwrap() error { return server.ErrUnknownEventID }

// ReplayEventsAfter sends the events of lastEventID's stream stored after
// it. An ID never given in this session, or one dropped, is an error
// wrapping server.ErrUnknownEventID (mcp-go answers 400).
func (s *boundedEventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	s.mu.Lock()
	l := s.sessions[sessionID]
	n, err := strconv.ParseInt(lastEventID, 10, 64)
	if l == nil || err != nil || n < 1 || n >= l.next {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %s", server.ErrUnknownEventID, lastEventID)
	}
	if n < l.first {
		s.mu.Unlock()
		return "", errEventDropped{id: lastEventID}
	}
	stream := l.events[n-l.first].stream
	var tail []*storedEvent
	for _, ev := range l.events[n-l.first+1:] {
		if ev.stream == stream {
			tail = append(tail, ev)
		}
	}
	msgs := make([]json.RawMessage, len(tail))
	for i, ev := range tail {
		msgs[i] = ev.message // never changed once stored; dropping sets a new nil
	}
	s.mu.Unlock()
	for i, ev := range tail {
		if err := send(strconv.FormatInt(ev.n, 10), msgs[i]); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// PurgeSession forgets the session's events.
func (s *boundedEventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[sessionID]
	if l == nil {
		return nil
	}
	for len(l.events) > 0 {
		s.dropOldest(l)
	}
	delete(s.sessions, sessionID)
	return nil
}

// dropped reports whether id is an event of the session that was dropped.
func (s *boundedEventStore) dropped(sessionID, id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessions[sessionID]
	return l != nil && n >= 1 && n < l.first
}

// stats is what the store keeps now: events and bytes across sessions.
func (s *boundedEventStore) stats() (events, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.sessions {
		events += len(l.events)
	}
	return events, s.total
}

// resumeGuard answers a GET resuming a streamable HTTP stream from an event
// this store dropped with a 400 that says so, instead of mcp-go's bare
// "Unknown Last-Event-ID".
func (s *boundedEventStore) resumeGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && id != "" && s.dropped(r.Header.Get("Mcp-Session-Id"), id) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "event_dropped",
				"message": fmt.Sprintf("cannot resume after event %s: it was dropped, as this session keeps only its last %d events and %d bytes "+
					"for resuming (and the gateway %d bytes in all); reopen the stream without Last-Event-ID, and call bridge_poll "+
					"for what is still held", id, s.maxEvents, s.maxBytes, s.maxTotal)})
			return
		}
		next.ServeHTTP(w, r)
	})
}
