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
	bySession map[string][]leased
}

type leased struct {
	reqID string // the JSON-RPC id of the call, as its raw JSON
	h     *bridge.Handover
}

// leaseKey is the key a request's leases are kept under: its MCP session,
// or for a call without one (stateless or 2026-07-28 HTTP) its entity.
func leaseKey(sessionID, gid string) string {
	if sessionID != "" {
		return "session:" + sessionID
	}
	return "entity:" + gid
}

// add keeps h, whose result for request reqID was written, until evidence
// comes; a handover holding nothing is not kept.
func (b *leaseBook) add(key, reqID string, h *bridge.Handover) {
	if !h.Lease() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bySession == nil {
		b.bySession = map[string][]leased{}
	}
	list := b.prune(b.bySession[key])
	b.bySession[key] = append(list, leased{reqID: reqID, h: h})
}

// prune drops the settled (lease ran out, or settled elsewhere) from list.
func (b *leaseBook) prune(list []leased) []leased {
	out := list[:0]
	for _, l := range list {
		if l.h.Holds() {
			out = append(out, l)
		}
	}
	for i := len(out); i < len(list); i++ {
		list[i] = leased{}
	}
	return out
}

// take removes and returns key's leases that pick accepts.
func (b *leaseBook) take(key string, pick func(leased) bool) []leased {
	b.mu.Lock()
	defer b.mu.Unlock()
	var got, kept []leased
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
// raw is its body (nil for a DELETE).
func (b *leaseBook) arrived(key string, raw []byte) {
	if cancelled, ok := cancelledRequest(raw); ok {
		for _, l := range b.take(key, func(l leased) bool { return l.reqID == cancelled }) {
			l.h.Return(true)
		}
		return
	}
	for _, l := range b.take(key, func(leased) bool { return true }) {
		l.h.Ack()
	}
}

// ended returns what key's session still had out: it ended without
// confirming it.
func (b *leaseBook) ended(key string) {
	for _, l := range b.take(key, func(leased) bool { return true }) {
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
