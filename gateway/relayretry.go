package gateway

import (
	"encoding/json"

	"github.com/google/uuid"
)

// retriedTools are the tools whose calls the relay re-issues after a
// gateway restart: with a request_id they are idempotent (a repeat
// publishes nothing and returns the first call's outcome).
var retriedTools = map[string]bool{"bridge_send": true, "bridge_broadcast": true, "bridge_ask": true}

// stampRequestID gives a client's tools/call of a retried tool a
// request_id when it has none, and reports whether the call may be
// re-issued after a gateway restart. Any other line, or one it cannot
// read as such a call, is returned unchanged and not retried.
func stampRequestID(line []byte) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil || string(msg["method"]) != `"tools/call"` || len(msg["id"]) == 0 {
		return line, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return line, false
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || !retriedTools[name] {
		return line, false
	}
	var args map[string]json.RawMessage
	if raw := params["arguments"]; len(raw) > 0 && string(raw) != "null" {
		if json.Unmarshal(raw, &args) != nil {
			return line, false // not an object: the gateway will say so
		}
	}
	if id, ok := args["request_id"]; ok && string(id) != "null" && string(id) != `""` {
		return line, true // the client's own id
	}
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	id, _ := json.Marshal("relay-" + uuid.NewString())
	args["request_id"] = id
	var err error
	if params["arguments"], err = json.Marshal(args); err != nil {
		return line, false
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return line, false
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return line, false
	}
	return out, true
}
