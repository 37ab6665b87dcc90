package mcp

import (
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// notify queues a notification for one session, or drops it if the
// session's queue is full (a nudge is a hint: the next one, or the
// client's own poll, brings the same news).
//
// It does not go through mcp-go's SendNotificationToSpecificClient on
// purpose. That call first marks a streamable HTTP session "upgrade to
// SSE" for good, and from then on mcp-go v1.2.1, with an event store
// configured, answers every POST of the session on a resumable stream it
// keeps in StreamableHTTPServer.resumableStreams until the session ends
// (~375 B a call, unbounded while the session lives; nothing outside
// mcp-go can remove an entry). Queued directly on the session's
// notification channel, a notification still reaches the client the same
// way — on the standalone GET stream if one is open, else on the POST in
// flight or the next one, which mcp-go upgrades to SSE for that response
// alone — so only a POST that carries a notification gets a stream: the
// entries grow with nudges (at most one per entity per NudgeEvery), not
// with calls. TestNudgedSessionCallsStayFlat holds this.
func (s *Server) notify(t nudgeTarget, method mcpgo.MCPMethod, params map[string]any) {
	s.queue(t.cs, method, params)
}

// queue puts a notification on cs's channel without marking the session
// SSE for good (see notify); progress goes this way too.
func (s *Server) queue(cs server.ClientSession, method mcpgo.MCPMethod, params map[string]any) {
	if cs == nil || !cs.Initialized() {
		return
	}
	n := mcpgo.JSONRPCNotification{
		JSONRPC: mcpgo.JSONRPC_VERSION,
		Notification: mcpgo.Notification{
			Method: string(method),
			Params: mcpgo.NotificationParams{AdditionalFields: params},
		},
	}
	select {
	case cs.NotificationChannel() <- n:
	default:
		s.log.Debug("mcp notification dropped: the session's queue is full", "session", cs.SessionID(), "method", string(method))
	}
}
