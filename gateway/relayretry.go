package gateway

import (
	"encoding/json"
	"slices"

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
	params["arguments"] = appendObject(nil, args)
	msg["params"] = appendObject(nil, params)
	return appendObject(make([]byte, 0, len(line)+64), msg), true
}

// appendObject writes m as a JSON object, keys sorted, each value's bytes
// as they are: they were read as valid JSON, so json.Marshal's check and
// compaction of every json.RawMessage (the whole call, once per level)
// would be work for nothing on each call through the relay.
func appendObject(b []byte, m map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		q, _ := json.Marshal(k) // a string always encodes
		b = append(b, q...)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	return append(b, '}')
}
