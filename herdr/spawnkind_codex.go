package herdr

import (
	"encoding/json"
	"sort"
	"strings"
)

// codexPaneVars are the variables herdr sets in the pane that the Codex
// worker must pass on to `herdbridge mcp` (env_vars): Codex starts MCP
// servers with almost none of its environment.
var codexPaneVars = []string{"HERDR_ENV", "HERDR_PANE_ID", "HERDR_SOCKET_PATH", "HERDR_SESSION", "XDG_STATE_HOME", "XDG_CONFIG_HOME"}

// CodexWorkerArgs are the `-c` config overrides a spawned Codex worker
// starts with so that it can work without a person: the herdbridge server
// (whatever ~/.codex/config.toml says, or lacks), with the worker's
// identity (env: name, role, state dir, spawn id, groups) given explicitly
// since Codex would not pass the pane's environment to it, herdr's pane
// variables passed on (env_vars), and every bridge tool approved
// (default_tools_approval_mode): a call that needs approval would leave the
// worker on a dialog, its pane blocked, instead of replying. Values are
// TOML as JSON writes it (a TOML basic string or array of them). exe is
// the herdbridge the server runs: the gateway's own binary.
func CodexWorkerArgs(exe string, identity map[string]string) []string {
	keys := make([]string, 0, len(identity))
	for k := range identity {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = k + "=" + jsonText(identity[k])
	}
	return []string{
		"-c", "mcp_servers.herdbridge.command=" + jsonText(exe),
		"-c", `mcp_servers.herdbridge.args=["mcp"]`,
		"-c", "mcp_servers.herdbridge.env={" + strings.Join(env, ", ") + "}",
		"-c", "mcp_servers.herdbridge.env_vars=" + jsonText(codexPaneVars),
		"-c", `mcp_servers.herdbridge.default_tools_approval_mode="approve"`,
	}
}

// codexWorkerArgs is spawnKinds' row for codex.
func codexWorkerArgs(e spawnEnv) []string { return CodexWorkerArgs(e.Exe, e.Identity) }

func jsonText(v any) string {
	b, _ := json.Marshal(v) // strings and string slices always marshal
	return string(b)
}
