package mcp

import (
	"encoding/json"
	"sync"

	"github.com/herdbridge/herdbridge/bridge"
)

// leaseBook keeps, per session, the handovers whose result was written to
// the client but not yet confirmed (bridge.Handover). HTTP gives no ack of
// its own: a response written into the kernel's socket buffer may never be
// read. The evidence that the client has a result is what it does next on
// the same session:
//
//   - its next request (any POST, or the DELETE that ends the session)
//     acks every result written before that request arrived;
//   - notifications/cancelled naming a request returns that request's
//     messages to held instead (the client ignores a cancelled call's
//     result), and acks nothing;
//   - a session that ends without a DELETE (idle timeout, the SSE stream
//     closed, shutdown) returns them, flagged redelivered.
//
// Whatever gets no evidence returns to held when its lease runs out
// (bridge.Config.DeliveryLease), so the book holds at most the calls of the
// last lease per session.
type leaseBook struct {
	mu        sync.Mutex
	bySession map[string][]*leased
}

// leased is one call's handover in the book: open while its call runs
// and its result is written, then leased until evidence comes.
type leased struct {
	reqID string // the JSON-RPC id of the call, canonical (requestID)
	h     *bridge.Handover
	// started reports whether the result began to reach the connection
	// (nil: never before the entry closes); evidence and cancelled are
	// what arrived for it while it was open.
	started             func() bool
	open                bool
	evidence, cancelled bool
}

// leaseKey is the key a request's leases are kept under: its MCP session,
// or for a call without one (stateless or 2026-07-28 HTTP) its entity.
func leaseKey(sessionID, gid string) string {
	if sessionID != "" {
		return "session:" + sessionID
	}
	return "entity:" + gid
}

// open enters a call before it runs: a client may read its whole result
// and send its next request before the handler has returned.
func (b *leaseBook) open(key, reqID string, h *bridge.Handover, started func() bool) *leased {
	l := &leased{reqID: reqID, h: h, started: started, open: true}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bySession == nil {
		b.bySession = map[string][]*leased{}
	}
	b.bySession[key] = append(b.prune(b.bySession[key]), l)
	return l
}

// close ends an open entry once the call's result is written (or failed):
// acked if evidence came meanwhile, returned if the write failed or the
// call was cancelled, else leased.
func (b *leaseBook) close(key string, l *leased, wrote, failed bool) {
	b.mu.Lock()
	l.open = false
	settle := !wrote || failed || l.cancelled || l.evidence
	if settle { // decided under the lock: a request arriving now finds it gone
		b.takeLocked(key, func(x *leased) bool { return x == l })
	}
	b.mu.Unlock()
	switch {
	case !wrote || failed || l.cancelled:
		l.h.Return(wrote)
	case l.evidence:
		l.h.Ack()
	default:
		l.h.Lease() // a handover holding nothing is pruned
	}
}

// add keeps h, whose result for request reqID is being written, until
// evidence comes (the stdio relay's word); a handover holding nothing is
// not kept.
func (b *leaseBook) add(key, reqID string, h *bridge.Handover) {
	if !h.Lease() {
		return
	}
	l := b.open(key, reqID, h, nil)
	b.mu.Lock()
	l.open = false
	b.mu.Unlock()
}

// prune drops the settled (lease ran out, or settled elsewhere) from list
// (mu held); open entries stay.
func (b *leaseBook) prune(list []*leased) []*leased {
	out := list[:0]
	for _, l := range list {
		if l.open || l.h.Holds() {
			out = append(out, l)
		}
	}
	clear(list[len(out):])
	return out
}

// take removes and returns key's entries that pick accepts (mu not held).
func (b *leaseBook) take(key string, pick func(*leased) bool) []*leased {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked(key, pick)
}

func (b *leaseBook) takeLocked(key string, pick func(*leased) bool) []*leased {
	var got, kept []*leased
	for _, l := range b.bySession[key] {
		if pick(l) {
			got = append(got, l)
		} else {
			kept = append(kept, l)
		}
	}
	if kept = b.prune(kept); len(kept) == 0 {
		delete(b.bySession, key)
	} else {
		b.bySession[key] = kept
	}
	return got
}

// arrived applies what a new request on key says about earlier results:
// raw is its body (nil for a DELETE). An open entry whose result began to
// go out is marked, and settled when it closes.
func (b *leaseBook) arrived(key string, raw []byte) {
	cancelled, isCancel := cancelledRequest(raw)
	b.mu.Lock()
	got := b.takeLocked(key, func(l *leased) bool {
		if isCancel && l.reqID != cancelled {
			return false
		}
		if l.open {
			if isCancel {
				l.cancelled = true
			} else if l.started != nil && l.started() {
				l.evidence = true
			}
			return false
		}
		return true
	})
	b.mu.Unlock()
	for _, l := range got {
		if isCancel {
			l.h.Return(true)
		} else {
			l.h.Ack()
		}
	}
}

// ended returns what key's session still had out: it ended without
// confirming it. Entries still open settle when their call ends.
func (b *leaseBook) ended(key string) {
	for _, l := range b.take(key, func(l *leased) bool { return !l.open }) {
		l.h.Return(true)
	}
}

// requestID is the JSON-RPC id of a request body ("" for a notification
// or a body it cannot read), in a canonical spelling.
func requestID(raw []byte) string {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return canonicalID(m.ID)
}

// cancelledRequest reads a notifications/cancelled body: the id of the
// request it cancels.
func cancelledRequest(raw []byte) (string, bool) {
	if raw == nil {
		return "", false
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Method != "notifications/cancelled" {
		return "", false
	}
	return canonicalID(m.Params.RequestID), true
}

// canonicalID spells a JSON-RPC id one way (7, 7.0 and "7" differ in JSON
// but a number is a number), so a cancel finds the call it names.
func canonicalID(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return ""
	}
	out, _ := json.Marshal(v)
	return string(out)
}
