package herdr

import "maps"

// kindSetup is what a spawned agent of one herdr kind needs, beyond the
// HERDBRIDGE_* environment every worker gets, to call the bridge without a
// dialog: a worker in a pane that waits on a permission prompt goes
// `blocked` and never replies.
type kindSetup struct {
	args []string          // put before the profile's own args (which can still override)
	env  map[string]string // added under the profile's env
}

// spawnKinds is the per-kind table, one row a CLI kind. A kind without a
// row starts with its profile's args and env only. pi needs no row: it has
// no permission dialogs and no folder trust, pi-mcp-adapter calls tools
// without asking unless the person set approveTools, and it passes pi's
// environment (the identity) to `herdbridge mcp`.
var spawnKinds = map[string]kindSetup{
	"claude": {args: claudeWorkerArgs},
	"gemini": {env: geminiWorkerEnv},
}

// claudeWorkerArgs give a spawned Claude Code the allow rule for every
// bridge tool and approve the project's .mcp.json herdbridge server: without
// the rule each call opens a permission dialog, without the approval the
// TUI opens "New MCP server found in this project" before anything else.
// --settings is a settings layer of its own (merged with the user's and the
// project's), and Claude Code 2.1.328 honours both keys from it, where it
// ignores the server approval from the project's own settings files.
var claudeWorkerArgs = []string{"--settings", `{"permissions":{"allow":["mcp__herdbridge__*"]},"enabledMcpjsonServers":["herdbridge"]}`}

// withKind returns p with its kind's setup applied: the kind's args first,
// the kind's env under the profile's. p's own slices and maps are not
// changed (profiles are shared by every spawn).
func withKind(p Profile) Profile {
	k, ok := spawnKinds[p.Kind]
	if !ok || len(p.Command) > 0 {
		return p
	}
	p.Args = append(append([]string(nil), k.args...), p.Args...)
	if len(k.env) > 0 {
		env := maps.Clone(k.env)
		maps.Copy(env, p.Env)
		p.Env = env
	}
	return p
}

// KindArgs is what a spawn adds to the command line of a kind's agent, for a
// test that starts the real CLI the same way.
func KindArgs(kind string) []string {
	return append([]string(nil), spawnKinds[kind].args...)
}
