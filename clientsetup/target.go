package clientsetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Entry is the MCP server entry setup writes for a client.
type Entry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env,omitempty" toml:"env,omitempty"`
}

// target is where one client keeps its MCP servers and its instructions.
type target struct {
	config string // the client's config file
	user   bool   // user scope: a new config file is private (0600)
	toml   bool   // Codex: config.toml, [mcp_servers.herdbridge]; else JSON, mcpServers.herdbridge
	skill  string // a Claude Code skill file to write, or ""
	agents string // an AGENTS.md to put the block in, or ""
	// settings: a Claude Code settings file to merge the allow rule into;
	// approve: one to approve the project's .mcp.json server in; "" for
	// none (--no-allow)
	settings, approve string
	note              string // what setup cannot do for this client
	// keys are client-specific keys of the JSON server entry (pi's
	// directTools); allowKeys those that let the model call the bridge
	// without a person approving each call (Gemini's trust), which
	// --no-allow leaves out
	keys, allowKeys map[string]any
	// allow: setup approves the bridge tools in the client config itself
	// (Codex's per-tool approval_mode); false with --no-allow
	allow bool
}

// clientTargets are the clients whose target is a function of its own
// (in CLIENT.go), by name, and their default scope.
var clientTargets = map[string]struct {
	target       func(scope, home string) (target, error)
	defaultScope string
}{
	"gemini": {geminiTarget, "user"},
	"pi":     {piTarget, "project"},
}

// derivesName are the clients for which setup without --name outside herdr
// writes a name derived from the project directory, or (user scope) refuses
// and says what to pass: the client would otherwise fail to connect with no
// reason shown.
var derivesName = map[string]bool{"claude": true, "gemini": true, "pi": true}

// Clients is every client setup knows, as the usage lists them.
var Clients = []string{"claude", "codex", "cursor", "gemini", "pi"}

// DefaultScope is the scope setup uses for client without --scope:
// project, but user for codex (it has no project scope) and gemini.
func DefaultScope(client string) string {
	if ct, ok := clientTargets[client]; ok {
		return ct.defaultScope
	}
	if client == "codex" {
		return "user"
	}
	return "project"
}

func targetFor(client, scope string) (target, error) {
	home, err := os.UserHomeDir()
	if err != nil && scope == "user" {
		return target{}, err
	}
	if ct, ok := clientTargets[client]; ok && (scope == "project" || scope == "user") {
		return ct.target(scope, home)
	}
	switch client + "/" + scope {
	case "claude/project":
		return target{config: ".mcp.json", skill: filepath.Join(".claude", "skills", "herdbridge", "SKILL.md"), settings: claudeSettingsPath(scope, home), approve: claudeApprovalPath(home)}, nil
	case "claude/user":
		return target{config: filepath.Join(home, ".claude.json"), user: true, skill: filepath.Join(home, ".claude", "skills", "herdbridge", "SKILL.md"), settings: claudeSettingsPath(scope, home)}, nil
	case "codex/user":
		dir := os.Getenv("CODEX_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".codex")
		}
		return target{config: filepath.Join(dir, "config.toml"), toml: true, user: true, agents: filepath.Join(dir, "AGENTS.md")}, nil
	case "codex/project":
		return target{}, errors.New("codex reads MCP servers from ~/.codex/config.toml only: use --scope user (the default for codex)")
	case "cursor/project":
		return target{config: filepath.Join(".cursor", "mcp.json"), agents: "AGENTS.md"}, nil
	case "cursor/user":
		return target{config: filepath.Join(home, ".cursor", "mcp.json"), user: true,
			note: "Cursor keeps user-wide rules in its settings, not in a file: paste `herdbridge skill --agents-md` into Settings → Rules, or run setup cursor in each project (it writes AGENTS.md)"}, nil
	}
	if scope != "project" && scope != "user" {
		return target{}, fmt.Errorf("--scope %q: use project or user", scope)
	}
	return target{}, fmt.Errorf("unknown client %q: use %s", client, ClientList())
}

// ClientList is "claude, codex, cursor, gemini or pi".
func ClientList() string {
	n := len(Clients)
	return strings.Join(Clients[:n-1], ", ") + " or " + Clients[n-1]
}

// entry is the JSON server entry t's client reads: e, plus the client's own
// keys.
func (t target) entry(e Entry) any {
	if len(t.keys) == 0 && len(t.allowKeys) == 0 {
		return e
	}
	m := map[string]any{"command": e.Command, "args": e.Args}
	if len(e.Env) > 0 {
		m["env"] = e.Env
	}
	for _, keys := range []map[string]any{t.keys, t.allowKeys} {
		for k, v := range keys {
			m[k] = v
		}
	}
	return m
}
