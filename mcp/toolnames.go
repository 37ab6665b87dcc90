package mcp

// ToolNames lists the bridge tools this server offers, in the order it
// lists them: what a client's per-tool configuration (herdbridge setup's
// approvals) names. The definitions need no core.
func ToolNames() []string {
	var s Server
	ts := s.tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Tool.Name
	}
	return out
}
