package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
)

// skillText is the agent-facing instructions: a Claude Code skill (with its
// front matter), and, without the front matter, the AGENTS.md block.
//
//go:embed skill.md
var skillText string

// skillBody is skillText without its front matter.
func skillBody() string {
	s := strings.TrimPrefix(skillText, "---\n")
	if i := strings.Index(s, "\n---\n"); i >= 0 {
		return s[i+len("\n---\n"):]
	}
	return skillText
}

const (
	agentsBegin = "<!-- herdbridge:begin (written by `herdbridge setup`; edits between these markers are replaced) -->"
	agentsEnd   = "<!-- herdbridge:end -->"
)

func skillCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "skill",
		Short: "Print the instructions that tell an agent how to use the bridge_* tools",
		Long: `Print the agent-facing instructions that herdbridge setup installs: when to use each
bridge_* tool and what each status means. It is a Claude Code skill (SKILL.md, with
name/description front matter); --agents-md prints it as the AGENTS.md block instead.`,
		Example: "  herdbridge skill > .claude/skills/herdbridge/SKILL.md\n  herdbridge skill --agents-md >> AGENTS.md",
		Args:    noArgs,
	}
	agentsMD := c.Flags().Bool("agents-md", false, "print the AGENTS.md block (between markers, no front matter)")
	c.RunE = func(*cobra.Command, []string) error {
		if *agentsMD {
			_, err := io.WriteString(stdout, agentsBlock())
			return err
		}
		_, err := io.WriteString(stdout, skillText)
		return err
	}
	return c
}

func agentsBlock() string { return agentsBegin + "\n" + skillBody() + agentsEnd + "\n" }

// mcpEntry is the MCP server entry setup writes for a client.
type mcpEntry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env,omitempty" toml:"env,omitempty"`
}

// setupTarget is where one client keeps its MCP servers and its instructions.
type setupTarget struct {
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

// clientTargets are the clients whose setupTarget is a function of its own
// (in setup_CLIENT.go), by name, and their default scope.
var clientTargets = map[string]struct {
	target       func(scope, home string) (setupTarget, error)
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

// setupClients is every client setup knows, as the usage lists them.
var setupClients = []string{"claude", "codex", "cursor", "gemini", "pi"}

func setupTargetFor(client, scope string) (setupTarget, error) {
	home, err := os.UserHomeDir()
	if err != nil && scope == "user" {
		return setupTarget{}, err
	}
	if ct, ok := clientTargets[client]; ok && (scope == "project" || scope == "user") {
		return ct.target(scope, home)
	}
	switch client + "/" + scope {
	case "claude/project":
		return setupTarget{config: ".mcp.json", skill: filepath.Join(".claude", "skills", "herdbridge", "SKILL.md"), settings: claudeSettingsPath(scope, home), approve: claudeApprovalPath(home)}, nil
	case "claude/user":
		return setupTarget{config: filepath.Join(home, ".claude.json"), user: true, skill: filepath.Join(home, ".claude", "skills", "herdbridge", "SKILL.md"), settings: claudeSettingsPath(scope, home)}, nil
	case "codex/user":
		dir := os.Getenv("CODEX_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".codex")
		}
		return setupTarget{config: filepath.Join(dir, "config.toml"), toml: true, user: true, agents: filepath.Join(dir, "AGENTS.md")}, nil
	case "codex/project":
		return setupTarget{}, errors.New("codex reads MCP servers from ~/.codex/config.toml only: use --scope user (the default for codex)")
	case "cursor/project":
		return setupTarget{config: filepath.Join(".cursor", "mcp.json"), agents: "AGENTS.md"}, nil
	case "cursor/user":
		return setupTarget{config: filepath.Join(home, ".cursor", "mcp.json"), user: true,
			note: "Cursor keeps user-wide rules in its settings, not in a file: paste `herdbridge skill --agents-md` into Settings → Rules, or run setup cursor in each project (it writes AGENTS.md)"}, nil
	}
	if scope != "project" && scope != "user" {
		return setupTarget{}, fmt.Errorf("--scope %q: use project or user", scope)
	}
	return setupTarget{}, fmt.Errorf("unknown client %q: use %s", client, clientList())
}

// clientList is "claude, codex, cursor, gemini or pi".
func clientList() string {
	n := len(setupClients)
	return strings.Join(setupClients[:n-1], ", ") + " or " + setupClients[n-1]
}

func setupCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "setup claude|codex|cursor|gemini|pi [--scope project|user] [--print] [--no-allow]",
		Short: "Connect an MCP client (Claude Code, Codex, Cursor, Gemini CLI, pi) to herdbridge",
		Long: `Write or merge herdbridge's MCP server entry into a client's configuration, and install
the instructions that tell its model how to use the bridge_* tools. Other entries and
keys in the file are kept; the file is replaced atomically.

  claude  project: .mcp.json, .claude/skills/herdbridge/SKILL.md, the allow rule
                   mcp__herdbridge__* in .claude/settings.local.json, and herdbridge in
                   enabledMcpjsonServers of ~/.claude/settings.json (the only place Claude
                   Code takes a .mcp.json server's approval from) (the default scope)
          user:    ~/.claude.json (mcpServers), ~/.claude/skills/herdbridge/SKILL.md and
                   the allow rule in ~/.claude/settings.json
          so claude -p and the TUI call the bridge without a dialog; --no-allow writes
          neither the rule nor the approval
  codex   user:    ~/.codex/config.toml ([mcp_servers.herdbridge] with env_vars, and an
          approval_mode = "approve" table per bridge tool) and ~/.codex/AGENTS.md
          ($CODEX_HOME if set; codex has no project scope)
  cursor  project: .cursor/mcp.json and AGENTS.md (the default scope)
          user:    ~/.cursor/mcp.json
  gemini  user:    ~/.gemini/settings.json (mcpServers.herdbridge, trust) and ~/.gemini/GEMINI.md
          (the default scope); project: .gemini/settings.json and GEMINI.md, which
          Gemini reads only in a folder the person trusted
  pi      project: .pi/mcp.json (pi-mcp-adapter, directTools) and AGENTS.md (the default)
          user:    ~/.pi/agent/mcp.json and ~/.pi/agent/AGENTS.md

--no-allow leaves out what lets the model call the bridge tools without a person
approving each call (Claude Code's rule and approval, Gemini's trust: true).

The entry runs "herdbridge mcp --default-role ROLE": a worker that herdbridge spawns in
the same directory gets its own name and role from its environment, which the defaults
do not override. Inside a herdr pane the name comes from the pane; elsewhere give
--name (written as --default-name) or set HERDBRIDGE_NAME. For claude, gemini and pi
without --name outside herdr, a project gets its directory's name; --scope user needs
--name.

For Codex, setup approves every bridge tool, so codex exec and the TUI call them without
asking, and lists in env_vars the variables Codex must pass to the server: it passes
almost none of its own environment. --print shows the change to each file as a diff
and writes nothing.`,
		Example: `  herdbridge setup claude                    # this repository: .mcp.json + the skill
  herdbridge setup codex --print             # show the change to config.toml as a diff, write nothing
  herdbridge setup cursor --scope user --name me`,
		Args: func(c *cobra.Command, args []string) error {
			if err := cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)(c, args); err != nil {
				return &usageError{err: fmt.Errorf("setup: %v (use %s)", err, clientList()), line: c.UseLine(), path: c.CommandPath()}
			}
			return nil
		},
		ValidArgs: setupClients,
	}
	fs, dir := newFlags(c)
	scope := fs.String("scope", "", "project or user (default: project for claude and cursor, user for codex)")
	printOnly := fs.Bool("print", false, "print the change to each file as a diff and write nothing")
	noAllow := fs.Bool("no-allow", false, "leave permissions to the person: no allow rule or server approval (claude), no tool approvals (codex), no trust (gemini)")
	name := fs.String("name", "", "default entity name (a spawned worker's $HERDBRIDGE_NAME still wins)")
	role := fs.String("role", "primary", "default role: primary, worker or orchestrator")
	command := fs.String("command", "", "the herdbridge executable the client runs (default: herdbridge if it is on PATH, else this binary)")
	_ = c.RegisterFlagCompletionFunc("role", roleCompletion)
	_ = c.RegisterFlagCompletionFunc("scope", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"project", "user"}, cobra.ShellCompDirectiveNoFileComp
	})
	c.RunE = func(c *cobra.Command, args []string) error {
		client := args[0]
		if *scope == "" {
			*scope = "project"
			if client == "codex" {
				*scope = "user"
			}
			if ct, ok := clientTargets[client]; ok {
				*scope = ct.defaultScope
			}
		}
		t, err := setupTargetFor(client, *scope)
		if err != nil {
			return err
		}
		t.allow = !*noAllow
		if *noAllow {
			t.settings, t.approve, t.allowKeys = "", "", nil
		}
		if derivesName[client] && *name == "" {
			if *name, err = setupDefaultName(*scope); err != nil {
				return err
			}
			if *name != "" {
				fmt.Fprintf(stderr, "note: no --name: outside herdr this project's Claude Code registers as %q (inside a herdr pane, as the pane's agent)\n", *name)
			}
		}
		exe, warn := herdbridgeCommand(*command)
		e := mcpEntry{Command: exe, Args: []string{"mcp", "--default-role", *role}}
		if *name != "" {
			e.Args = append(e.Args, "--default-name", *name)
		}
		if c.Flags().Changed("state-dir") || os.Getenv("HERDBRIDGE_STATE_DIR") != "" {
			abs, err := filepath.Abs(*dir)
			if err != nil {
				return err
			}
			e.Env = map[string]string{"HERDBRIDGE_STATE_DIR": abs}
		}
		if *printOnly {
			return previewEdits(setupEdits(t, e), stdout)
		}
		if warn != "" {
			fmt.Fprintln(stderr, "note:", warn)
		}
		return setupWrite(t, e, stdout, stderr)
	}
	return c
}

// herdbridgeCommand is the executable a client config should run, and a
// note when it is not what the user may expect.
func herdbridgeCommand(flag string) (string, string) {
	if flag != "" {
		return flag, ""
	}
	if _, err := exec.LookPath("herdbridge"); err == nil {
		return "herdbridge", ""
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil || strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "herdbridge", "herdbridge is not on PATH and this binary is temporary (go run): `go install ./cmd/herdbridge` and put $(go env GOPATH)/bin on PATH"
	}
	return exe, "herdbridge is not on PATH: the config runs " + exe
}

// entry is the JSON server entry t's client reads: e, plus the client's own
// keys.
func (t setupTarget) entry(e mcpEntry) any {
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

func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// fileEdit is one file setup changes: edit maps its contents (nil when it
// does not exist) to the new contents; mode is a new file's.
type fileEdit struct {
	path string
	mode fs.FileMode
	edit func([]byte) ([]byte, error)
}

// setupEdits is every file setup changes for t: the client config, its
// permission settings, the skill, the AGENTS.md block.
func setupEdits(t setupTarget, e mcpEntry) []fileEdit {
	merge := func(old []byte) ([]byte, error) { return mergeJSON(old, t.entry(e)) }
	if t.toml {
		merge = func(old []byte) ([]byte, error) { return mergeTOML(old, codexEntryFor(e, t.allow)) }
	}
	mode := fs.FileMode(0o644)
	if t.user {
		mode = 0o600
	}
	edits := []fileEdit{{t.config, mode, merge}}
	if t.settings != "" {
		both := t.approve == t.settings
		edits = append(edits, fileEdit{t.settings, 0o644, func(old []byte) ([]byte, error) { return mergeClaudeSettings(old, true, both) }})
	}
	if t.approve != "" && t.approve != t.settings {
		edits = append(edits, fileEdit{t.approve, 0o644, func(old []byte) ([]byte, error) { return mergeClaudeSettings(old, false, true) }})
	}
	if t.skill != "" {
		edits = append(edits, fileEdit{t.skill, 0o644, func([]byte) ([]byte, error) { return []byte(skillText), nil }})
	}
	if t.agents != "" {
		edits = append(edits, fileEdit{t.agents, 0o644, func(old []byte) ([]byte, error) { return mergeAgentsMD(old), nil }})
	}
	return edits
}

func setupWrite(t setupTarget, e mcpEntry, stdout, stderr io.Writer) error {
	for _, fe := range setupEdits(t, e) {
		if err := updateFile(fe.path, fe.mode, fe.edit, stdout); err != nil {
			return err
		}
	}
	for _, f := range []string{t.settings, t.approve, filepath.Join(".claude", "settings.json")} {
		if old, err := os.ReadFile(f); t.approve != "" && err == nil && claudeDisabled(old) {
			fmt.Fprintf(stderr, "note: %s lists herdbridge in disabledMcpjsonServers: remove it there, or Claude Code will not start the server\n", f)
		}
	}
	if t.note != "" {
		fmt.Fprintln(stderr, "note:", t.note)
	}
	fmt.Fprintln(stdout, "restart the client (or start a new session) to load herdbridge; `herdbridge gateway` must run (see herdbridge service install --user)")
	return nil
}

// updateFile rewrites path with edit(old contents) — atomically (a temp
// file in the same directory, synced, renamed over it), keeping an existing
// file's mode and following a symlink to its target — and says what it did.
func updateFile(path string, mode fs.FileMode, edit func([]byte) ([]byte, error), stdout io.Writer) error {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	data, err := edit(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if existed && bytes.Equal(old, data) {
		fmt.Fprintf(stdout, "unchanged %s\n", path)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	verb := "wrote"
	if existed {
		verb = "updated"
	}
	fmt.Fprintf(stdout, "%s %s\n", verb, path)
	return nil
}

// mergeJSON sets mcpServers.herdbridge in a JSON config and keeps every
// other key and server as it was (values byte for byte; keys come out
// sorted, as encoding/json writes maps).
func mergeJSON(old []byte, e any) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, fmt.Errorf("not a JSON object (%v): fix or move it, nothing was changed", err)
		}
	}
	servers := map[string]json.RawMessage{}
	if raw, ok := doc["mcpServers"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return nil, fmt.Errorf("mcpServers is not an object (%v): nothing was changed", err)
		}
	}
	entry, err := marshalJSON(e)
	if err != nil {
		return nil, err
	}
	servers["herdbridge"] = entry
	if doc["mcpServers"], err = marshalJSON(servers); err != nil {
		return nil, err
	}
	out, err := marshalJSON(doc)
	if err != nil {
		return nil, err
	}
	if len(old) > 0 && jsonEqual(old, out) {
		return old, nil // nothing to change: keep the file as it is, formatting included
	}
	return out, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// mergeAgentsMD puts the instructions block into an AGENTS.md: between its
// markers if they are there, else appended; the rest of the file is kept.
func mergeAgentsMD(old []byte) []byte {
	s := string(old)
	block := agentsBlock()
	if i := strings.Index(s, agentsBegin); i >= 0 {
		if j := strings.Index(s[i:], agentsEnd); j >= 0 {
			end := i + j + len(agentsEnd)
			if end < len(s) && s[end] == '\n' {
				end++
			}
			return []byte(s[:i] + block + s[end:])
		}
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if s != "" {
		s += "\n"
	}
	return []byte(s + block)
}
