package mcp

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// clientCeiling is how long one MCP client lets a tool call run before it
// gives up on it, as measured or read from its source (issue 21). A wait
// longer than that would end in the client's timeout, not in our pending.
type clientCeiling struct {
	// name is the clientInfo.name the client sends at initialize, or a
	// prefix of it ending in "-" (pi-mcp-adapter names itself
	// pi-mcp-<server name>).
	name    string
	ceiling time.Duration
	// progress: progress notifications restart the client's clock, so
	// only a call without a progress token is bound by the ceiling.
	progress bool
}

// clientCeilings is the table the README's "Client ceilings" repeats.
var clientCeilings = []clientCeiling{
	{name: "claude-code", ceiling: 300 * time.Second, progress: true}, // idle timer: 300 s HTTP/SSE, 1,800 s stdio, reset by progress; ~27.8 h hard
	{name: "codex-mcp-client", ceiling: 300 * time.Second},            // 300 s hard; progress does not extend it
	{name: "gemini-cli-mcp-client", ceiling: 600 * time.Second},       // 600 s hard
	{name: "pi-mcp-", ceiling: 60 * time.Second},                      // the MCP SDK's 60 s; the adapter sends no progress token
}

// clientWaitCap is the longest a call from client name may wait (0: no
// bound beyond --max-wait): 90% of its ceiling, so the result is written
// before the client's clock runs out.
func clientWaitCap(name string, progressToken bool) time.Duration {
	for _, c := range clientCeilings {
		match := name == c.name || strings.HasSuffix(c.name, "-") && strings.HasPrefix(name, c.name)
		if !match {
			continue
		}
		if c.progress && progressToken {
			return 0
		}
		return c.ceiling * 9 / 10
	}
	return 0
}

// clientName is the clientInfo.name of the client making the request in
// ctx: from the request's own _meta (2026-07-28), else from what its
// session was told at initialize; "" when unknown.
func clientName(ctx context.Context) string {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return info.ClientInfo.Name
	}
	if cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return cs.GetClientInfo().Name
	}
	return ""
}

// clientInfo keeps what a stream session's client said at initialize
// (mcp-go's own sessions keep it the same way).
type clientInfo struct {
	info atomic.Value // mcpgo.Implementation
	caps atomic.Value // mcpgo.ClientCapabilities
}

func (c *clientInfo) GetClientInfo() mcpgo.Implementation {
	v, _ := c.info.Load().(mcpgo.Implementation)
	return v
}
func (c *clientInfo) SetClientInfo(i mcpgo.Implementation) { c.info.Store(i) }
func (c *clientInfo) GetClientCapabilities() mcpgo.ClientCapabilities {
	v, _ := c.caps.Load().(mcpgo.ClientCapabilities)
	return v
}
func (c *clientInfo) SetClientCapabilities(caps mcpgo.ClientCapabilities) { c.caps.Store(caps) }
