package mcp

import (
	"context"
	"errors"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// The causes herdbridge cancels a call's context with, so that its result
// and the log say why the call ended. A cancel without one of these (or
// the gateway's stop, told by the core) came from the client: mcp-go
// cancels a call on the client's notifications/cancelled, and net/http
// when the client closes the request.
var (
	errSessionClosed = errors.New("the client's session closed while the call was open")
	errTokenRevoked  = errors.New("the entity's tokens were revoked while the call was open")
)

// cancelReason is why ctx (a tool call's) ended.
func (s *Server) cancelReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case s.core != nil && s.core.IsStopping():
		return "the gateway is stopping (a restart or shutdown): call it again once it is back"
	case errors.Is(cause, errSessionClosed), errors.Is(cause, errTokenRevoked):
		return cause.Error()
	case errors.Is(cause, context.DeadlineExceeded):
		return "the call ran past its deadline"
	}
	return "the client cancelled the call (MCP notifications/cancelled or a closed request, e.g. at the client's own tool timeout); call it again to keep waiting"
}

// cancelled is the result of a call whose context ended before its body
// returned, with the true reason; the reason is logged too, since a client
// that cancelled reads no result.
func (s *Server) cancelled(ctx context.Context, tool, gid string) *mcpgo.CallToolResult {
	why := s.cancelReason(ctx)
	s.log.Info("tool call cancelled", "tool", tool, bridge.LogGID, gid, "reason", why)
	return mcpgo.NewToolResultError("herdbridge: " + tool + " ended early: " + why)
}
