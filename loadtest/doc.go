// Package loadtest drives agents against running gateways over the real
// MCP transports — streamable HTTP with a bearer token, and the stdio relay
// (`herdbridge mcp`, a child process per agent) — with mixed traffic:
// briefs, replies, asks and answers, broadcasts and filtered polls. Every
// message carries a unique tag in its body, so a Ledger accounts for it
// by id, never by timing: accepted, delivered, lost, duplicated (and
// whether a duplicate falls in the documented at-least-once window of a
// gateway crash), with latency per kind.
//
// The soak (TestSoak, `make soak`) runs it against two gateway processes
// on a broker, with a gateway kill -9 and a broker restart during the run,
// and samples each gateway's runtime figures (goroutines, heap, RSS, open
// files) over `herdbridge stats`. `herdbridge loadtest` (RunTool) runs it
// against one gateway — the running one, or a throwaway in-process one —
// and reports rate, latency per kind, errors and the gateway's cost
// (ToolReport, whose JSON `make bench` reads). It never calls a gateway's
// core: what it measures is what an agent sees.
package loadtest
