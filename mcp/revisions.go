package mcp

import (
	"encoding/json"
	"slices"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Revisions are the MCP revisions herdbridge serves, newest first: those
// with the initialize handshake. mcp-go v1.2.1 also serves 2026-07-28,
// which has no sessions and no initialize, and Claude Code probes it first;
// but the bridge keys on the session what a stateless request cannot carry
// — nudges (log messages, inbox updates pushed between calls), the level
// logging/setLevel chose, the ack of what a call handed over (the session's
// next request), the stdio relay's replayed handshake. So a 2026-07-28
// request is answered with UnsupportedProtocolVersion listing these, and a
// client negotiates down to initialize (README "MCP revisions").
var Revisions = []string{
	mcpgo.ProtocolVersion20251125,
	mcpgo.ProtocolVersion20250618,
	mcpgo.ProtocolVersion20250326,
	mcpgo.ProtocolVersion20241105,
}

// unservedRevision is the revision a request's _meta declares when it is
// one herdbridge does not serve (a 2026-07-28 request), else "".
func unservedRevision(raw []byte) string {
	var m struct {
		Params struct {
			Meta *mcpgo.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	v := m.Params.Meta.ProtocolVersion()
	if v == "" || slices.Contains(Revisions, v) {
		return ""
	}
	return v
}

// unservedError answers request id that asked for revision v.
func unservedError(id json.RawMessage, v string) mcpgo.JSONRPCError {
	e := mcpgo.UnsupportedProtocolVersionError{Version: v, Supported: Revisions}.JSONRPCError()
	var rid any
	if json.Unmarshal(id, &rid) == nil {
		e.ID = mcpgo.NewRequestId(rid)
	}
	return e
}
