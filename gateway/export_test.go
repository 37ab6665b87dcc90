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

// Outbox is how many messages for other hosts wait in the gateway's
// outbox (0 without a broker).
func (g *Gateway) Outbox() int {
	if g.split == nil {
		return 0
	}
	n, _ := g.split.Outbox()
	return n
}

// StatsOf is what `herdbridge stats` gets from g.
func StatsOf(g *Gateway) *Stats { return g.stats() }
