package herdr

import (
	"encoding/json"
	"maps"
	"os"
)

// kindSetup is what a spawned agent of one herdr kind needs, beyond the
// HERDBRIDGE_* environment every worker gets, to call the bridge without a
// dialog: a worker in a pane that waits on a permission prompt goes
// `blocked` and never replies.
type kindSetup struct {
	args func(spawnEnv) []string // put before the profile's own args
	env  map[string]string       // added under the profile's env
}

// spawnEnv is what a kind's args may depend on.
type spawnEnv struct {
	Exe      string // the herdbridge executable the agent's MCP server runs
	StateDir string // the gateway's state dir
	// Identity is the worker's HERDBRIDGE_* environment, for a kind whose
	// CLI does not pass its environment on to MCP servers (codex)
	Identity map[string]string
}

// spawnKinds is the per-kind table, one row a CLI kind. A kind without a
// row starts with its profile's args and env only. pi needs no row: it has
// no permission dialogs and no folder trust, pi-mcp-adapter calls tools
// without asking unless the person set approveTools, and it passes pi's
// environment (the identity) to `herdbridge mcp`.
var spawnKinds = map[string]kindSetup{
	"claude": {args: claudeWorkerArgs},
	"codex":  {args: codexWorkerArgs},
	"gemini": {env: geminiWorkerEnv},
}

// claudeWorkerArgs give a spawned Claude Code its bridge server and the
// permission to use it. --mcp-config adds the herdbridge server whatever
// the worker's cwd holds (Claude Code 2.1.328 starts it instead of a
// .mcp.json server of the same name, not beside it, and hands it its own
// environment: the worker's HERDBRIDGE_NAME and _ROLE reach `herdbridge
// mcp`). --settings is a settings layer of its own: the allow rule for every
// bridge tool (without it each call opens a permission dialog) and the
// approval of a project's .mcp.json herdbridge (without it the TUI opens
// "New MCP server found in this project" before anything else).
func claudeWorkerArgs(e spawnEnv) []string {
	server := map[string]any{"command": e.Exe, "args": []string{"mcp"}}
	if e.StateDir != "" {
		server["env"] = map[string]string{"HERDBRIDGE_STATE_DIR": e.StateDir}
	}
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"herdbridge": server}})
	return []string{
		"--mcp-config", string(mcpConfig),
		"--settings", `{"permissions":{"allow":["mcp__herdbridge__*"]},"enabledMcpjsonServers":["herdbridge"]}`,
	}
}

// withKind returns p with its kind's setup applied: the kind's args first,
// the kind's env under the profile's. p's own slices and maps are not
// changed (profiles are shared by every spawn).
func withKind(p Profile, e spawnEnv) Profile {
	k, ok := spawnKinds[p.Kind]
	if !ok || len(p.Command) > 0 {
		return p
	}
	if k.args != nil {
		p.Args = append(k.args(e), p.Args...)
	}
	if len(k.env) > 0 {
		env := maps.Clone(k.env)
		maps.Copy(env, p.Env)
		p.Env = env
	}
	return p
}

// spawnEnv is what this spawner tells a kind's setup: Exe, else this
// process's executable (the gateway is herdbridge), and the identity.
func (s *Spawner) spawnEnv(identity map[string]string) spawnEnv {
	exe := s.Exe
	if exe == "" {
		if p, err := os.Executable(); err == nil {
			exe = p
		} else {
			exe = "herdbridge"
		}
	}
	return spawnEnv{Exe: exe, StateDir: s.StateDir, Identity: identity}
}

// KindArgs is what a spawn adds to the command line of a kind's agent, for a
// test that starts the real CLI the same way.
func KindArgs(kind, exe, stateDir string) []string {
	if k := spawnKinds[kind]; k.args != nil {
		return k.args(spawnEnv{Exe: exe, StateDir: stateDir})
	}
	return nil
}
