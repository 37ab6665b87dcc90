package mcp

import (
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestCanonicalID: a cancel names its call whatever the id's spelling.
func TestCanonicalID(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{`7`, `7.0`}, {`"x"`, ` "x"`}, {`1e1`, `10`}} {
		if canonicalID([]byte(tc.a)) != canonicalID([]byte(tc.b)) {
			t.Errorf("%s and %s name different calls", tc.a, tc.b)
		}
	}
	if canonicalID([]byte(`7`)) == canonicalID([]byte(`"7"`)) {
		t.Error("a number and a string are different ids")
	}
	if id, ok := cancelledRequest([]byte(`{"method":"notifications/cancelled","params":{"requestId":3}}`)); !ok || id != "3" {
		t.Errorf("cancelledRequest = %q %v", id, ok)
	}
}

// TestLeaseBookSettles: the next request acks what was written before it,
// a cancel returns only the call it names, an ended session returns the
// rest, and nothing stays in the book.
func TestLeaseBookSettles(t *testing.T) {
	var b leaseBook
	held := func() *bridge.Handover {
		h := &bridge.Handover{}
		h.OnSettle(func() {}, func(bool) {})
		return h
	}
	h1, h2 := held(), held()
	b.add("k", "1", h1)
	b.add("k", "2", h2)
	b.arrived("k", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`))
	if !h1.Holds() || h2.Holds() {
		t.Fatalf("a cancel of 2 must return 2 only: h1 %v h2 %v", h1.Holds(), h2.Holds())
	}
	b.arrived("k", []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`))
	if h1.Holds() {
		t.Fatal("the next request did not ack 1")
	}
	h3 := held()
	open := b.open("k", "4", h3, func() bool { return true })
	b.arrived("k", []byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`))
	if !h3.Holds() {
		t.Fatal("an open entry was settled before its call ended")
	}
	b.close("k", open, true, false)
	if h3.Holds() {
		t.Fatal("evidence that came while the call was open did not ack it once written")
	}
	h4 := held()
	b.add("k", "6", h4)
	b.ended("k")
	if h4.Holds() || len(b.bySession) != 0 {
		t.Fatalf("an ended session left %v in the book (h4 holds %v)", b.bySession, h4.Holds())
	}
}

// FuzzLeaseBodies: whatever a client posts, reading it for the ack rule
// neither panics nor settles what it should not.
func FuzzLeaseBodies(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	f.Add([]byte(`{"method":"notifications/cancelled","params":{"requestId":"a"}}`))
	f.Add([]byte(`{"method":"notifications/cancelled","params":{"requestId":null}}`))
	f.Add([]byte(`[{"id":1}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b leaseBook
		h := &bridge.Handover{}
		h.OnSettle(func() {}, func(bool) {})
		b.add("k", requestID(raw), h)
		b.arrived("k", raw)
		if _, isCancel := cancelledRequest(raw); !isCancel && h.Holds() {
			t.Fatalf("a request that is no cancel did not ack: %q", raw)
		}
	})
}
