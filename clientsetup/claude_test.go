package clientsetup

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestMergeClaudeSettings: the allow rule (and, for a project, the server's
// approval) is added once, beside every other key and rule the person has;
// a second merge changes nothing; shapes setup cannot edit are refused with
// the file left alone.
func TestMergeClaudeSettings(t *testing.T) {
	old := `{"model": "opus", "permissions": {"allow": ["Bash(make test)"], "deny": ["WebFetch"], "defaultMode": "default"},
 "enabledMcpjsonServers": ["github"], "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "a<b>&c"}]}]}}`
	out, err := mergeClaudeSettings([]byte(old), true, true)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	_ = json.Unmarshal([]byte(old), &want)
	want["permissions"].(map[string]any)["allow"] = []any{"Bash(make test)", "mcp__herdbridge__*"}
	want["enabledMcpjsonServers"] = []any{"github", "herdbridge"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged:\n%s\nwant %v", out, want)
	}
	if !strings.Contains(string(out), `"a<b>&c"`) {
		t.Errorf("HTML-escaped a value: %s", out)
	}
	again, err := mergeClaudeSettings(out, true, true)
	if err != nil || string(again) != string(out) {
		t.Errorf("a second merge changed it (%v):\n%s", err, again)
	}

	user, err := mergeClaudeSettings(nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	_ = json.Unmarshal(user, &u)
	if !reflect.DeepEqual(u, map[string]any{"permissions": map[string]any{"allow": []any{"mcp__herdbridge__*"}}}) {
		t.Errorf("user settings from nothing: %s", user)
	}

	for _, bad := range []string{`[1]`, `{"permissions": []}`, `{"permissions": {"allow": "x"}}`, `{"enabledMcpjsonServers": {"a": 1}}`} {
		if out, err := mergeClaudeSettings([]byte(bad), true, true); err == nil {
			t.Errorf("%s: merged to %s, want an error", bad, out)
		}
	}
}
