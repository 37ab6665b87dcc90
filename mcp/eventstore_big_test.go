package mcp

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// An event over the session's bound on its own (a big poll result) is
// never copied: storing it allocates a few bytes, not its megabytes.
func TestEventOverTheBoundIsNotCopied(t *testing.T) {
	s := newBoundedEventStore(0, 0, 0)
	huge := json.RawMessage(`"` + strings.Repeat("z", DefaultEventBytes+1<<20) + `"`)
	store(t, s, "s1", "a", msg(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	id := store(t, s, "s1", "a", huge)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("storing a %d-byte event over the bound allocated %d bytes: it was copied", len(huge), grew)
	}
	if !s.dropped("s1", id) {
		t.Fatal("the event over the bound was kept")
	}
	if n, b := s.stats(); n != 0 || b != 0 {
		t.Fatalf("the store keeps %d events, %d bytes: want the session's older one dropped with it", n, b)
	}
}
