package herdr

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// codexOverrides decodes agent.start's args for a codex worker: each
// `-c key=value` with value read as TOML (as Codex reads it), and the
// arguments that are not overrides.
func codexOverrides(t *testing.T, args []any) (map[string]any, []string) {
	t.Helper()
	over, rest := map[string]any{}, []string{}
	for i := 0; i < len(args); i++ {
		a, _ := args[i].(string)
		if a != "-c" || i+1 == len(args) {
			rest = append(rest, a)
			continue
		}
		i++
		kv, _ := args[i].(string)
		k, v, ok := strings.Cut(kv, "=")
		var doc map[string]any
		if !ok || toml.Unmarshal([]byte("v = "+v), &doc) != nil {
			t.Fatalf("-c %q is not key=TOML", kv)
		}
		over[k] = doc["v"]
	}
	return over, rest
}

// TestSpawnCodexWorkerCanWork: a Codex worker is started with its
// identity given to the herdbridge server explicitly (Codex passes its
// MCP servers almost none of its environment: the worker's model saw no
// bridge tool at all), herdr's pane variables passed on, every bridge tool
// approved (else its calls wait on a dialog, or under exec are refused),
// and the profile's own arguments after; the pane's environment has the
// identity too. Against the fake herdr.
func TestSpawnCodexWorkerCanWork(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second, StateDir: "/state dir",
		Profiles: map[string]Profile{"cx": {Kind: "codex", Args: []string{"--model", "o3"}, Groups: []string{"build"}}}}
	gid := "0b3c0000-0000-4000-8000-0000000000c0"
	got, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: "cx", Name: "cx-1", GID: gid, Args: []string{"--search"}})
	if err != nil {
		t.Fatal(err)
	}
	starts := requests(t, fake, "agent.start")
	if len(starts) != 1 || starts[0]["kind"] != "codex" {
		t.Fatalf("agent.start %v", starts)
	}
	args, _ := starts[0]["args"].([]any)
	over, rest := codexOverrides(t, args)
	if !slices.Equal(rest, []string{"--model", "o3", "--search"}) || args[0] != "-c" {
		t.Errorf("the profile's args must follow the overrides: %v", args)
	}
	exe, _ := os.Executable()
	if over["mcp_servers.herdbridge.command"] != exe || !slices.Equal(anyStrings(over["mcp_servers.herdbridge.args"]), []string{"mcp"}) {
		t.Errorf("server command %v %v, want %s mcp", over["mcp_servers.herdbridge.command"], over["mcp_servers.herdbridge.args"], exe)
	}
	env, _ := over["mcp_servers.herdbridge.env"].(map[string]any)
	want := map[string]string{"HERDBRIDGE_NAME": "cx-1", "HERDBRIDGE_ROLE": "worker", "HERDBRIDGE_STATE_DIR": "/state dir",
		"HERDBRIDGE_SPAWN_ID": gid, "HERDBRIDGE_GROUPS": "build"}
	st := fake.Pane(got.Pane)
	for k, v := range want {
		if env[k] != v {
			t.Errorf("server env %s = %v, want %q", k, env[k], v)
		}
		if st.Env[k] != v {
			t.Errorf("pane env %s = %q, want %q", k, st.Env[k], v)
		}
	}
	if vars := anyStrings(over["mcp_servers.herdbridge.env_vars"]); !slices.Contains(vars, "HERDR_PANE_ID") || !slices.Contains(vars, "HERDR_SOCKET_PATH") || !slices.Contains(vars, "HERDR_ENV") {
		t.Errorf("env_vars %v must pass herdr's pane variables on", vars)
	}
	if over["mcp_servers.herdbridge.default_tools_approval_mode"] != "approve" {
		t.Errorf("bridge tools not approved: %v", over)
	}
	if st.Agent != "codex" || st.Name != "cx-1" || !st.InteractiveReady {
		t.Errorf("spawned %+v", st)
	}
}

func anyStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
