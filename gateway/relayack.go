package gateway

import (
	"encoding/json"
	"net"

	"github.com/herdbridge/herdbridge/mcp"
)

// The relay's half of the stdio ack rule (README "Semantics"): the
// gateway acks what a call handed over only when the relay says it wrote
// the call's result to the client. A client that timed out and sent
// notifications/cancelled ignores the result, so the relay does not write
// it and says so: the messages go back to held instead of being acked into
// a call nobody reads (a gateway stalled past the client's timeout).

// noteCancel records a client's notifications/cancelled for a call still
// pending (r.mu held).
func (r *relayer) noteCancel(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil {
		return
	}
	id := canonicalRPCID(n.Params.RequestID)
	for pending := range r.pending {
		if canonicalRPCID(json.RawMessage(pending)) == id {
			r.cancelled[id] = true
			return
		}
	}
}

// forgetCancels drops the cancels of a connection that is gone: its calls
// were answered by failPending, and their ids may be used again.
func (r *relayer) forgetCancels() {
	r.mu.Lock()
	clear(r.cancelled)
	r.mu.Unlock()
}

// confirm tells the gateway whether the client got the result of call id.
// A lost confirmation costs a redelivery after the gateway's lease, never
// a message.
func confirm(c net.Conn, id json.RawMessage, delivered bool) {
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcp.ResultNotice,
		"params": map[string]any{"id": id, "delivered": delivered}})
	if err != nil {
		return
	}
	_, _ = c.Write(append(msg, '\n'))
}

// canonicalRPCID spells a JSON-RPC id one way (5 and 5.0 are one number).
func canonicalRPCID(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return ""
	}
	out, _ := json.Marshal(v)
	return string(out)
}
