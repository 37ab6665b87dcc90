package mcp

import (
	"context"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// cutReason says why a call's context ended before its body did: the
// gateway stopping, its session closing, its tokens revoked, or the client
// cancelling it (notifications/cancelled, its own timeout — Codex cancels
// at 300 s —, or the HTTP request dropped). herdbridge cancels its own cuts
// with a cause (errSessionClosed, errTokenRevoked), so a cancel without one
// came from the client; it must never blame a restart that did not happen.
func (s *Server) cutReason(ctx context.Context) string {
	switch {
	case s.core != nil && s.core.IsStopping():
		return "herdbridge: the call was cut because the gateway is stopping or restarting"
	case errors.Is(context.Cause(ctx), errSessionClosed):
		return "herdbridge: the call was cut because its MCP session closed"
	case errors.Is(context.Cause(ctx), errTokenRevoked):
		return "herdbridge: the call was cut because this entity's tokens were revoked (herdbridge register issues a new one)"
	}
	return "herdbridge: the client cancelled the call before it ended (a cancel request, its own timeout, or a dropped connection)"
}

// cancelled is the result of a call whose context ended before its body
// returned, with the true reason; the reason is logged too, since a client
// that cancelled reads no result.
func (s *Server) cancelled(ctx context.Context, tool, gid string) *mcpgo.CallToolResult {
	why := s.cutReason(ctx)
	s.log.Info("tool call cancelled", "tool", tool, bridge.LogGID, gid, "reason", why)
	return errorResult(why, "call it again: "+tool+" with the same arguments")
}
