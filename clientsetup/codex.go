package clientsetup

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/herdbridge/herdbridge/mcp"
)

// codexEnvVars are the variables Codex is told to pass from its own
// environment to `herdbridge mcp` (env_vars). Codex starts an MCP server
// with a few variables only (HOME, PATH, USER, LANG, TERM, …), so without
// these a worker that bridge_spawn starts with HERDBRIDGE_NAME and
// HERDBRIDGE_ROLE set registers under the config's default name instead of
// its own, and an agent in a herdr pane does not know the pane. A variable
// that is not set is left out, so the list is safe outside herdr too.
var codexEnvVars = []string{
	"HERDBRIDGE_NAME", "HERDBRIDGE_ROLE", "HERDBRIDGE_GROUPS", "HERDBRIDGE_STATE_DIR", "HERDBRIDGE_SPAWN_ID", "HERDBRIDGE_HISTORY",
	"HERDR_ENV", "HERDR_PANE_ID", "HERDR_SOCKET_PATH", "HERDR_SESSION",
	"XDG_STATE_HOME", "XDG_CONFIG_HOME", // where the state dir and herdr's socket are by default
}

// codexApprove is Codex's per-tool approval_mode that runs a call without
// asking, in the TUI and in `codex exec` (whose approval policy is never:
// a call that needs approval is refused there).
const codexApprove = "approve"

// codexEntry is [mcp_servers.herdbridge] as setup writes it: the server,
// the variables it gets from Codex's environment, and (unless --no-allow)
// an approval for each bridge tool.
type codexEntry struct {
	Command string               `toml:"command"`
	Args    []string             `toml:"args"`
	Env     map[string]string    `toml:"env,omitempty"`
	EnvVars []string             `toml:"env_vars,omitempty"`
	Tools   map[string]codexTool `toml:"tools,omitempty"`
}

type codexTool struct {
	ApprovalMode string `toml:"approval_mode"`
}

// codexEntryFor is e for Codex; allow approves every bridge tool. The
// tools' annotations already let Codex call all but bridge_stop and
// bridge_interrupt (destructive) without asking; the explicit approvals
// make that hold for those two as well, and whatever Codex's defaults
// become.
func codexEntryFor(e Entry, allow bool) codexEntry {
	c := codexEntry{Command: e.Command, Args: e.Args, Env: e.Env, EnvVars: codexEnvVars}
	if allow {
		c.Tools = map[string]codexTool{}
		for _, n := range mcp.ToolNames() {
			c.Tools[n] = codexTool{ApprovalMode: codexApprove}
		}
	}
	return c
}

// tomlTable is the [mcp_servers.herdbridge] table (env as an inline table)
// and its per-tool sub-tables, one block of lines setup owns.
func tomlTable(e codexEntry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("[mcp_servers.herdbridge]\n")
	for _, kv := range []struct {
		k string
		v any
	}{{"command", e.Command}, {"args", e.Args}} {
		if err := tomlLine(&b, kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	if len(e.Env) > 0 {
		keys := make([]string, 0, len(e.Env))
		for k := range e.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			v, err := toml.Marshal(map[string]string{"v": e.Env[k]})
			if err != nil {
				return nil, err
			}
			parts = append(parts, k+" = "+strings.TrimSpace(strings.TrimPrefix(string(v), "v = ")))
		}
		fmt.Fprintf(&b, "env = { %s }\n", strings.Join(parts, ", "))
	}
	if len(e.EnvVars) > 0 {
		b.WriteString("# passed from Codex's environment: a spawned worker's identity, its herdr pane\n")
		if err := tomlLine(&b, "env_vars", e.EnvVars); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(e.Tools))
	for n := range e.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i == 0 {
			b.WriteString("\n# herdbridge setup codex: the bridge tools run without asking (--no-allow leaves this out)\n")
		} else {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[mcp_servers.herdbridge.tools.%s]\n", n)
		if err := tomlLine(&b, "approval_mode", e.Tools[n].ApprovalMode); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// tomlLine writes k = v with v as TOML writes it.
func tomlLine(b *bytes.Buffer, k string, v any) error {
	out, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "%s = %s", k, strings.TrimPrefix(string(out), "v = "))
	return nil
}

var (
	tomlHeader    = regexp.MustCompile(`^\s*\[`)
	tomlOurHeader = regexp.MustCompile(`^\s*\[\s*mcp_servers\s*\.\s*("herdbridge"|herdbridge)\s*(\.[^\]]*)?\]\s*(#.*)?$`)
)

// mergeTOML puts the [mcp_servers.herdbridge] table into a Codex
// config.toml without touching the rest of the file: the file is parsed
// first (nothing is changed in a file that does not parse); an existing
// herdbridge table (and its sub-tables) is replaced in place, else the table
// is appended; the result must parse and hold exactly our entry, or nothing
// is written. Comments and the order of everything else survive, which a
// decode/encode round trip would lose.
func mergeTOML(old []byte, e codexEntry) ([]byte, error) {
	var doc map[string]any
	if err := toml.Unmarshal(old, &doc); err != nil {
		return nil, fmt.Errorf("not valid TOML (%v): fix it first, nothing was changed", err)
	}
	table, err := tomlTable(e)
	if err != nil {
		return nil, err
	}
	if cur, ok := tomlEntry(doc); ok && reflect.DeepEqual(cur, e) {
		return old, nil
	}
	out := replaceTOMLTable(string(old), table)
	var check map[string]any
	if err := toml.Unmarshal([]byte(out), &check); err != nil {
		return nil, fmt.Errorf("mcp_servers.herdbridge is defined in a way setup cannot edit (%v): remove it and run setup again", err)
	}
	if cur, ok := tomlEntry(check); !ok || !reflect.DeepEqual(cur, e) {
		return nil, errors.New("mcp_servers.herdbridge is defined in a way setup cannot edit (dotted keys or an inline table): remove it and run setup again")
	}
	return []byte(out), nil
}

// replaceTOMLTable is old with its herdbridge tables (the first one's
// place) replaced by table, or table appended after a blank line.
func replaceTOMLTable(old string, table []byte) string {
	var out strings.Builder
	replaced, skipping := false, false
	for _, l := range strings.SplitAfter(old, "\n") {
		switch {
		case tomlOurHeader.MatchString(l):
			if !replaced {
				out.Write(table)
				replaced = true
			}
			skipping = true
			continue
		case tomlHeader.MatchString(l):
			if skipping && !strings.HasSuffix(out.String(), "\n\n") {
				out.WriteString("\n") // the blank line the skipped table ended with
			}
			skipping = false
		}
		if !skipping {
			out.WriteString(l)
		}
	}
	if !replaced {
		if s := out.String(); s != "" && !strings.HasSuffix(s, "\n") {
			out.WriteString("\n")
		}
		if out.Len() > 0 {
			out.WriteString("\n")
		}
		out.Write(table)
	}
	return out.String()
}

// tomlEntry reads mcp_servers.herdbridge back from a decoded config.
func tomlEntry(doc map[string]any) (codexEntry, bool) {
	servers, _ := doc["mcp_servers"].(map[string]any)
	hb, ok := servers["herdbridge"].(map[string]any)
	if !ok {
		return codexEntry{}, false
	}
	raw, err := toml.Marshal(hb)
	if err != nil {
		return codexEntry{}, false
	}
	var e codexEntry
	if toml.Unmarshal(raw, &e) != nil {
		return codexEntry{}, false
	}
	if len(e.Env) == 0 {
		e.Env = nil
	}
	if len(e.EnvVars) == 0 {
		e.EnvVars = nil
	}
	if len(e.Tools) == 0 {
		e.Tools = nil
	}
	return e, true
}
