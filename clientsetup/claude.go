package clientsetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/herdbridge/herdbridge/gateway"
)

// claudeAllowRule is the Claude Code permission rule that lets every
// herdbridge tool run without asking: headless (`claude -p`) refuses a tool
// no rule allows, and a worker in a herdr pane would sit on the dialog.
const claudeAllowRule = "mcp__herdbridge__*"

// claudeSettingsPath is where setup puts the allow rule for a scope: the
// project's .claude/settings.local.json, or ~/.claude/settings.json. Not the
// project's shared .claude/settings.json: Claude Code 2.1.328 did not honour
// an allow rule for an MCP tool from it (headless, the call was refused
// exactly as with no rule), and a permission is the person's choice, not
// the repository's.
func claudeSettingsPath(scope, home string) string {
	if scope == "user" {
		return filepath.Join(home, ".claude", "settings.json")
	}
	return filepath.Join(".claude", "settings.local.json")
}

// claudeApprovalPath is where a project's .mcp.json server is approved:
// ~/.claude/settings.json. Claude Code 2.1.328 reads enabledMcpjsonServers
// from the user's settings (or --settings) only; from the project's
// settings.json or settings.local.json it is ignored and the server stays
// "⏸ Pending approval" (tried with claude mcp list and the TUI).
func claudeApprovalPath(home string) string { return filepath.Join(home, ".claude", "settings.json") }

// mergeClaudeSettings adds what makes herdbridge autonomous in Claude Code
// to a settings.json, keeping every other key and rule: with allow, the
// rule in permissions.allow; with approve, herdbridge in
// enabledMcpjsonServers. A server the person listed in
// disabledMcpjsonServers stays disabled: setup does not overrule them.
func mergeClaudeSettings(old []byte, allow, approve bool) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, fmt.Errorf("not a JSON object (%v): fix or move it, nothing was changed", err)
		}
	}
	var err error
	if allow {
		if doc["permissions"], err = addAllowRule(doc["permissions"]); err != nil {
			return nil, err
		}
	}
	if approve {
		if doc["enabledMcpjsonServers"], err = addToList(doc["enabledMcpjsonServers"], "enabledMcpjsonServers", "herdbridge"); err != nil {
			return nil, err
		}
	}
	out, err := marshalJSON(doc)
	if err != nil {
		return nil, err
	}
	if len(old) > 0 && jsonEqual(old, out) {
		return old, nil
	}
	return out, nil
}

// addAllowRule adds claudeAllowRule to a permissions object's allow list.
func addAllowRule(raw json.RawMessage) (json.RawMessage, error) {
	perms := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &perms); err != nil {
			return nil, fmt.Errorf("permissions is not an object (%v): nothing was changed", err)
		}
	}
	var err error
	if perms["allow"], err = addToList(perms["allow"], "permissions.allow", claudeAllowRule); err != nil {
		return nil, err
	}
	return marshalJSON(perms)
}

// addToList appends v to a JSON list of strings unless it is there.
func addToList(raw json.RawMessage, what, v string) (json.RawMessage, error) {
	var list []string
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("%s is not a list of strings (%v): nothing was changed", what, err)
		}
	}
	if !slices.Contains(list, v) {
		list = append(list, v)
	}
	return marshalJSON(list)
}

// claudeDisabled says whether the project's settings disable herdbridge
// (disabledMcpjsonServers), which setup reports rather than overrules.
func claudeDisabled(settings []byte) bool {
	var doc struct {
		Disabled []string `json:"disabledMcpjsonServers"`
	}
	return json.Unmarshal(settings, &doc) == nil && slices.Contains(doc.Disabled, "herdbridge")
}

// defaultName is the --default-name setup writes when --name was not
// given. Inside a herdr pane each agent gets its pane's name at run time, so
// none is needed there; a project elsewhere gets its directory's name (stable,
// and the one session that runs there holds it); a user-wide config outside
// herdr has nothing stable to derive from, so setup refuses and says what
// to pass (the client would otherwise fail to connect with no reason given).
func defaultName(scope string) (string, error) {
	if gateway.InHerdr() != "" {
		return "", nil
	}
	if scope == "user" {
		return "", fmt.Errorf("setup --scope user outside a herdr pane needs --name NAME (the entity name this client registers as, e.g. --name %s): one user-wide config serves every project, so there is no directory to name it after", claudeUserExample())
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return gateway.DeriveName(filepath.Base(wd), wd, ""), nil
}

func claudeUserExample() string {
	if u := os.Getenv("USER"); u != "" {
		if n := gateway.DeriveName(u, "", ""); n != "" {
			return n
		}
	}
	return "lead"
}
