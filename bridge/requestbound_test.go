package bridge_test

import (
	"fmt"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestRequestBookBounded: the request book keeps in memory at most its
// bounds of published calls (per entity, in all), however many sends
// carry a request_id; a repeat of a call it evicted is still deduped from
// the store, also after a restart (which loads only the most recent), and
// published again once RequestMemory has passed.
func TestRequestBookBounded(t *testing.T) {
	h, gt := gatedHarness(t, func(cfg *bridge.Config) {
		cfg.RequestsInMemory, cfg.RequestsPerEntityInMemory = 6, 4
	})
	p, _ := pair(h)
	q := h.reg("q", bridge.RolePrimary)
	r := h.reg("r", bridge.RolePrimary)
	firsts := map[string]*bridge.Result{}
	sendAll := func(from bridge.Entity, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%d", from.Name, i)
			firsts[id] = h.send(from, bridge.SendRequest{Target: "w", Message: "brief " + id, RequestID: id})
			if got := h.c.RequestsInMemory(); got > 6 {
				t.Fatalf("after %s the book keeps %d calls in memory, want at most 6", id, got)
			}
		}
	}
	sendAll(p, 20)
	if got := h.c.RequestsInMemory(); got != 4 {
		t.Fatalf("one entity's 20 sends: %d calls in memory, want its bound 4", got)
	}
	sendAll(q, 20)
	sendAll(r, 20)
	if got := h.c.RequestsInMemory(); got != 6 {
		t.Fatalf("60 sends: %d calls in memory, want the bound 6", got)
	}
	repeat := func(what, id string) {
		t.Helper()
		again := h.send(p, bridge.SendRequest{Target: "w", Message: "brief " + id, RequestID: id})
		wantDeduped(t, what, firsts[id], again)
	}
	published := gt.published()
	repeat("a repeat of an evicted call", "p-0")
	repeat("another", "p-7")
	h.restart()
	if got := h.c.RequestsInMemory(); got > 6 {
		t.Fatalf("after a restart the book loaded %d calls into memory, want at most 6", got)
	}
	repeat("a repeat of an evicted call after a restart", "p-1")
	if n := gt.published(); n != published {
		t.Fatalf("%d messages published by repeats of evicted calls, want none", n-published)
	}
	h.clk.Advance(bridge.RequestMemory)
	again := h.send(p, bridge.SendRequest{Target: "w", Message: "brief p-2", RequestID: "p-2"})
	if again.Deduped || again.MsgID == firsts["p-2"].MsgID {
		t.Fatalf("a repeat after RequestMemory: %+v, want a new message", again)
	}
}
