package gateway

import (
	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/mcp"
)

// SetUnsigned has a gateway neither sign nor verify: benchmarks measure
// the cost of trust with it. Tests only.
func SetUnsigned(c *Config, unsigned bool) { c.unsigned = unsigned }

// MCPServer is the gateway's MCP server (benchmarks add a no-op tool).
func (g *Gateway) MCPServer() *mcp.Server { return g.mcp }

// Transport is the gateway's transport (tests publish raw envelopes on it).
func (g *Gateway) Transport() bridge.Transport { return g.tr }
