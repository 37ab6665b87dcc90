package herdr

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestSpawnClaudeWorker: a spawned profile of kind claude starts `claude`
// with its identity in the environment and, before the profile's and the
// spawn's own args, --mcp-config naming the herdbridge server (so it has the
// bridge in any cwd) and --settings allowing every bridge tool and approving
// a project's herdbridge server (so neither a permission dialog nor the
// new-server dialog holds the pane); the shared profile is left as it was.
// cmd/herdbridge's TestClaudeCodeWorkerArgs runs the real CLI with these args.
func TestSpawnClaudeWorker(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(20*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	prof := Profile{Kind: "claude", Args: []string{"--model", "opus"}, Env: map[string]string{"TEAM": "x"}}
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second, StateDir: "/state", Exe: "/opt/hb/herdbridge", Profiles: map[string]Profile{"rev": prof, "other": {Kind: "amp"}}}
	for i, name := range []string{"rev-1", "rev-2"} {
		got, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: "rev", Name: name, GID: "g" + name, Args: []string{"--verbose"}})
		if err != nil {
			t.Fatal(err)
		}
		st := fake.Pane(got.Pane)
		if st.Agent != "claude" || st.Env["HERDBRIDGE_NAME"] != name || st.Env["HERDBRIDGE_ROLE"] != "worker" ||
			st.Env["HERDBRIDGE_STATE_DIR"] != "/state" || st.Env["HERDBRIDGE_SPAWN_ID"] != "g"+name || st.Env["TEAM"] != "x" {
			t.Errorf("spawn %d: agent %q env %v", i, st.Agent, st.Env)
		}
		args := startArgs(t, fake)[got.Pane]
		if len(args) != 7 || args[0] != "--mcp-config" || args[2] != "--settings" || !slices.Equal(args[4:], []string{"--model", "opus", "--verbose"}) {
			t.Fatalf("spawn %d: claude args %q", i, args)
		}
		var mcpConfig struct {
			MCPServers map[string]struct {
				Command string
				Args    []string
				Env     map[string]string
			}
		}
		if err := json.Unmarshal([]byte(args[1]), &mcpConfig); err != nil {
			t.Fatalf("spawn %d: --mcp-config %s: %v", i, args[1], err)
		}
		if srv := mcpConfig.MCPServers["herdbridge"]; srv.Command != "/opt/hb/herdbridge" || !slices.Equal(srv.Args, []string{"mcp"}) || srv.Env["HERDBRIDGE_STATE_DIR"] != "/state" || len(mcpConfig.MCPServers) != 1 {
			t.Errorf("spawn %d: --mcp-config %s", i, args[1])
		}
		var settings struct {
			Permissions struct{ Allow []string }
			Enabled     []string `json:"enabledMcpjsonServers"`
		}
		if err := json.Unmarshal([]byte(args[3]), &settings); err != nil || !slices.Equal(settings.Permissions.Allow, []string{"mcp__herdbridge__*"}) ||
			!slices.Equal(settings.Enabled, []string{"herdbridge"}) {
			t.Errorf("spawn %d: --settings %s (%v)", i, args[3], err)
		}
	}
	if !slices.Equal(prof.Args, []string{"--model", "opus"}) || !slices.Equal(sp.Profiles["rev"].Args, []string{"--model", "opus"}) {
		t.Errorf("the profile changed: %q", sp.Profiles["rev"].Args)
	}
	// a kind without a row starts with its own args only
	got, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: "other", Name: "o", GID: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if args := startArgs(t, fake)[got.Pane]; len(args) != 0 {
		t.Errorf("kind amp got args %q", args)
	}
}

// startArgs is the args of the last agent.start the fake got, by pane.
func startArgs(t *testing.T, fake *herdrtest.Server) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range requests(t, fake, "agent.start") {
		pane, _ := r["pane_id"].(string)
		raw, _ := r["args"].([]any)
		args := []string{}
		for _, a := range raw {
			s, _ := a.(string)
			args = append(args, s)
		}
		out[pane] = args
	}
	return out
}
