package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

func msg(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)) }

func replay(t *testing.T, s *boundedEventStore, sid, after string) (stream string, ids []string, err error) {
	t.Helper()
	stream, err = s.ReplayEventsAfter(context.Background(), sid, after, func(id string, _ json.RawMessage) error {
		ids = append(ids, id)
		return nil
	})
	return stream, ids, err
}

func store(t *testing.T, s *boundedEventStore, sid, stream string, m json.RawMessage) string {
	t.Helper()
	id, err := s.StoreEvent(context.Background(), sid, stream, m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The store replays a stream after an event, keeps at most its count per
// session (dropping the oldest), and says a dropped event was dropped.
func TestEventStoreBoundedByCount(t *testing.T) {
	s := newBoundedEventStore(4, 1<<20, 1<<20)
	var ids []string
	for i := range 10 {
		stream := "a"
		if i%2 == 1 {
			stream = "b"
		}
		ids = append(ids, store(t, s, "s1", stream, msg(i)))
	}
	// kept: events 7..10 (indices 6..9); 7 and 9 on a, 8 and 10 on b
	stream, got, err := replay(t, s, "s1", ids[6])
	if err != nil || stream != "a" || fmt.Sprint(got) != "[9]" {
		t.Fatalf("replay after 7: stream %q ids %v err %v", stream, got, err)
	}
	if _, got, err := replay(t, s, "s1", ids[7]); err != nil || fmt.Sprint(got) != "[10]" {
		t.Fatalf("replay after 8: %v %v", got, err)
	}
	_, _, err = replay(t, s, "s1", ids[5])
	var de errEventDropped
	if !errors.As(err, &de) || !errors.Is(err, server.ErrUnknownEventID) {
		t.Fatalf("replay after a dropped event: %v, want errEventDropped wrapping ErrUnknownEventID", err)
	}
	if !s.dropped("s1", ids[0]) || s.dropped("s1", ids[6]) || s.dropped("s2", ids[0]) {
		t.Fatal("dropped() is wrong")
	}
	for _, bad := range []string{"11", "0", "x", ""} {
		if _, _, err := replay(t, s, "s1", bad); !errors.Is(err, server.ErrUnknownEventID) || errors.As(err, &de) {
			t.Fatalf("replay after %q: %v, want unknown (not dropped)", bad, err)
		}
	}
	if n, _ := s.stats(); n != 4 {
		t.Fatalf("%d events kept, want 4", n)
	}
}

// Bytes bound a session, and all sessions together; an event over the
// session's bound on its own is dropped at once (with all before it), so
// resuming from before it is refused rather than replayed with a gap.
func TestEventStoreBoundedByBytes(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 998) + `"`) // 1000 bytes
	s := newBoundedEventStore(1000, 3000, 5000)
	var ids []string
	for range 5 {
		ids = append(ids, store(t, s, "s1", "a", big))
	}
	if _, got, err := replay(t, s, "s1", ids[2]); err != nil || len(got) != 2 {
		t.Fatalf("replay after the 3rd of 5 (3 kept): %v %v", got, err)
	}
	if !s.dropped("s1", ids[1]) {
		t.Fatal("the 2nd of 5 events of 1000 bytes is kept under a 3000-byte bound")
	}
	// another session: the total (5000) drops s1's oldest first
	for range 3 {
		store(t, s, "s2", "b", big)
	}
	if n, b := s.stats(); n != 5 || b != 5000 {
		t.Fatalf("kept %d events, %d bytes; want 5 and 5000", n, b)
	}
	if !s.dropped("s1", ids[2]) || s.dropped("s1", ids[3]) {
		t.Fatal("the total bound did not drop the oldest event across sessions")
	}
	// one event over a session's bound
	huge := json.RawMessage(`"` + strings.Repeat("y", 3998) + `"`)
	hid := store(t, s, "s1", "a", huge)
	if !s.dropped("s1", hid) || !s.dropped("s1", ids[4]) {
		t.Fatal("an event over the bound on its own was kept, or kept what came before it")
	}
	if _, _, err := replay(t, s, "s1", ids[4]); err == nil {
		t.Fatal("replay from before a dropped event succeeded: a silent gap")
	}
	next := store(t, s, "s1", "a", msg(1))
	if _, got, err := replay(t, s, "s1", next); err != nil || len(got) != 0 {
		t.Fatalf("replay after the newest: %v %v", got, err)
	}
	if err := s.PurgeSession(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if n, b := s.stats(); n != 3 || b != 3000 {
		t.Fatalf("after purging s1: %d events, %d bytes; want s2's 3 and 3000", n, b)
	}
	if _, _, err := replay(t, s, "s1", next); !errors.Is(err, server.ErrUnknownEventID) {
		t.Fatalf("replay on a purged session: %v", err)
	}
	if len(s.fifo)-s.head-s.stale != 3 {
		t.Fatalf("arrival order holds %d live entries, want 3", len(s.fifo)-s.head)
	}
}

// Many sessions storing and replaying at once stay within the bounds.
func TestEventStoreConcurrent(t *testing.T) {
	s := newBoundedEventStore(16, 4096, 32<<10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprint("s", g)
			for i := range 500 {
				id, _ := s.StoreEvent(context.Background(), sid, "a", msg(i))
				_, _ = s.ReplayEventsAfter(context.Background(), sid, id, func(string, json.RawMessage) error { return nil })
			}
			if g%2 == 0 {
				_ = s.PurgeSession(context.Background(), sid)
			}
		}()
	}
	wg.Wait()
	n, b := s.stats()
	if n > 4*16 || b > 32<<10 {
		t.Fatalf("kept %d events, %d bytes", n, b)
	}
	if len(s.fifo) > 4*(n+64) {
		t.Fatalf("arrival order grew to %d entries for %d events kept", len(s.fifo), n)
	}
}

// A GET resuming after a dropped event gets a 400 that says so.
func TestResumeFromDroppedEvent(t *testing.T) {
	s := newBoundedEventStore(2, 1<<20, 1<<20)
	for i := range 3 {
		store(t, s, "sess", "a", msg(i))
	}
	h := s.resumeGuard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
	do := func(id string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set("Mcp-Session-Id", "sess")
		r.Header.Set("Last-Event-ID", id)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do("1")
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "event_dropped") || !strings.Contains(w.Body.String(), "last 2 events") {
		t.Fatalf("resume after a dropped event: %d %s", w.Code, w.Body)
	}
	if w := do("2"); w.Code != 299 {
		t.Fatalf("resume after a kept event: %d, want it passed on", w.Code)
	}
}
