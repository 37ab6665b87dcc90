// Package clientsetup is `herdbridge setup`: it writes or merges
// herdbridge's MCP server entry into one agent CLI's configuration (Claude
// Code, Codex, Cursor, Gemini CLI, pi) — JSON or TOML, keeping every other
// key, server and comment — with the permission entries that let the model
// call the bridge tools unattended, the identity variables a spawned
// worker's server needs, and the agent-facing instructions (a skill, an
// AGENTS.md block). A rerun changes nothing; --print shows the change as a
// diff instead.
package clientsetup

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/herdbridge/herdbridge/internal/fileedit"
)

// Request is one `herdbridge setup CLIENT` as its flags give it.
type Request struct {
	Client string
	Scope  string // project or user; "" for DefaultScope(Client)
	// NoAllow leaves out what lets the model call the bridge tools without
	// a person approving each call
	NoAllow bool
	Name    string // --default-name; "" derives one where the client needs it
	Role    string // --default-role
	Command string // the executable the client runs; "" for herdbridge (on PATH) or this binary
	// StateDir, when set, is written into the entry's environment as an
	// absolute HERDBRIDGE_STATE_DIR
	StateDir string
	Print    bool // show each file's change as a diff and write nothing
}

// Run carries out r: notes for the person go to stderr, what was written
// (or, with Print, the diffs) to stdout.
func Run(r Request, stdout, stderr io.Writer) error {
	if r.Scope == "" {
		r.Scope = DefaultScope(r.Client)
	}
	t, err := targetFor(r.Client, r.Scope)
	if err != nil {
		return err
	}
	t.allow = !r.NoAllow
	if r.NoAllow {
		t.settings, t.approve, t.allowKeys = "", "", nil
	}
	if derivesName[r.Client] && r.Name == "" {
		if r.Name, err = defaultName(r.Scope); err != nil {
			return err
		}
		if r.Name != "" {
			fmt.Fprintf(stderr, "note: no --name: outside herdr this project's Claude Code registers as %q (inside a herdr pane, as the pane's agent)\n", r.Name)
		}
	}
	exe, warn := herdbridgeCommand(r.Command)
	e := Entry{Command: exe, Args: []string{"mcp", "--default-role", r.Role}}
	if r.Name != "" {
		e.Args = append(e.Args, "--default-name", r.Name)
	}
	if r.StateDir != "" {
		abs, err := filepath.Abs(r.StateDir)
		if err != nil {
			return err
		}
		e.Env = map[string]string{"HERDBRIDGE_STATE_DIR": abs}
	}
	if r.Print {
		return preview(edits(t, e), stdout)
	}
	if warn != "" {
		fmt.Fprintln(stderr, "note:", warn)
	}
	return write(t, e, stdout, stderr)
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

// fileEdit is one file setup changes: edit maps its contents (nil when it
// does not exist) to the new contents; mode is a new file's.
type fileEdit struct {
	path string
	mode fs.FileMode
	edit fileedit.Edit
}

// edits is every file setup changes for t: the client config, its
// permission settings, the skill, the AGENTS.md block.
func edits(t target, e Entry) []fileEdit {
	merge := func(old []byte) ([]byte, error) { return mergeJSON(old, t.entry(e)) }
	if t.toml {
		merge = func(old []byte) ([]byte, error) { return mergeTOML(old, codexEntryFor(e, t.allow)) }
	}
	mode := fs.FileMode(0o644)
	if t.user {
		mode = 0o600
	}
	out := []fileEdit{{t.config, mode, merge}}
	if t.settings != "" {
		both := t.approve == t.settings
		out = append(out, fileEdit{t.settings, 0o644, func(old []byte) ([]byte, error) { return mergeClaudeSettings(old, true, both) }})
	}
	if t.approve != "" && t.approve != t.settings {
		out = append(out, fileEdit{t.approve, 0o644, func(old []byte) ([]byte, error) { return mergeClaudeSettings(old, false, true) }})
	}
	if t.skill != "" {
		out = append(out, fileEdit{t.skill, 0o644, func([]byte) ([]byte, error) { return []byte(SkillText), nil }})
	}
	if t.agents != "" {
		out = append(out, fileEdit{t.agents, 0o644, func(old []byte) ([]byte, error) { return mergeAgentsMD(old), nil }})
	}
	return out
}

// preview prints, for every file setup would change, the change as a
// unified diff, and writes nothing: what --print shows.
func preview(edits []fileEdit, stdout io.Writer) error {
	for _, fe := range edits {
		if err := fileedit.Diff(fe.path, fe.edit, stdout); err != nil {
			return err
		}
	}
	return nil
}

func write(t target, e Entry, stdout, stderr io.Writer) error {
	for _, fe := range edits(t, e) {
		if err := fileedit.Update(fe.path, fe.mode, fe.edit, stdout); err != nil {
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
