package clientsetup

import (
	"os"
	"path/filepath"
)

// piRequestTimeoutMs is the per-call timeout setup gives pi-mcp-adapter.
// Without it the adapter uses the MCP SDK's 60 s and sends no progress
// token, so a bridge_poll waiting longer than that (a gateway --max-wait
// above ~55 s) would fail in pi; ten minutes is Gemini CLI's own default
// and well above any --max-wait a person would set.
const piRequestTimeoutMs = 600_000

// piAdapterNote: pi has no MCP of its own; pi-mcp-adapter 2.36.0 imports pi
// under the scope pi moved to (@earendil-works), which pi 0.73.1
// (@mariozechner) does not provide, so it fails to load ("Cannot find
// module '@earendil-works/pi-coding-agent'") unless those names resolve to
// pi's own packages.
const piAdapterNote = "pi needs pi-mcp-adapter, and pi-mcp-adapter 2.36.0 loads on pi 0.73.1 only with pi's packages also installed under their new names: " +
	"npm install -g @earendil-works/pi-coding-agent@npm:@mariozechner/pi-coding-agent@0.73.1 @earendil-works/pi-ai@npm:@mariozechner/pi-ai@0.73.1 @earendil-works/pi-tui@npm:@mariozechner/pi-tui@0.73.1 && pi install npm:pi-mcp-adapter@2.36.0 (see the README's pi section)"

// piTarget is pi-mcp-adapter's own override file (.pi/mcp.json, or
// ~/.pi/agent/mcp.json: $PI_CODING_AGENT_DIR if set) and pi's AGENTS.md.
// The adapter also reads .mcp.json, but that is Claude Code's project file
// (setup claude writes it); the adapter's own file holds the adapter's keys
// and wins over .mcp.json's entry of the same name. directTools registers each bridge tool as a pi tool
// (herdbridge_bridge_send) instead of routing every call through the
// adapter's one "mcp" proxy tool, which the model would have to search.
// pi asks no permission for tools (the adapter's approveTools is off unless
// the person sets it), and the adapter passes pi's environment to the
// server, so a spawned worker's identity variables reach it.
func piTarget(scope, home string) (target, error) {
	keys := map[string]any{"directTools": true, "requestTimeoutMs": piRequestTimeoutMs}
	if scope == "project" {
		return target{config: filepath.Join(".pi", "mcp.json"), agents: "AGENTS.md", keys: keys, note: piAdapterNote}, nil
	}
	dir := os.Getenv("PI_CODING_AGENT_DIR")
	if dir == "" {
		dir = filepath.Join(home, ".pi", "agent")
	}
	return target{config: filepath.Join(dir, "mcp.json"), user: true, agents: filepath.Join(dir, "AGENTS.md"), keys: keys, note: piAdapterNote}, nil
}
