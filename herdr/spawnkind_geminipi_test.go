package herdr

import (
	"slices"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestSpawnKindGeminiPi: a spawned Gemini CLI worker gets its identity and
// the session-only folder trust that keeps it off the trust dialog (an
// operator's own setting of it wins); a pi worker gets its identity and
// nothing else, its args as the profile says; the profile map is not
// changed by a spawn.
func TestSpawnKindGeminiPi(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(20*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	profiles := map[string]Profile{
		"gem":       {Kind: "gemini", Args: []string{"--model", "flash"}, Env: map[string]string{"A": "1"}},
		"gemstrict": {Kind: "gemini", Env: map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "false"}},
		"pi":        {Kind: "pi", Args: []string{"--provider", "fake"}},
	}
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second, StateDir: "/state", Profiles: profiles}
	for _, tc := range []struct {
		profile, name, gid, trust string
		args                      []any
	}{
		{"gem", "gw", "0b3c0000-0000-4000-8000-000000000001", "true", []any{"--model", "flash"}},
		{"gemstrict", "gs", "0b3c0000-0000-4000-8000-000000000002", "false", nil},
		{"pi", "pw", "0b3c0000-0000-4000-8000-000000000003", "", []any{"--provider", "fake"}},
	} {
		got, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: tc.profile, Name: tc.name, GID: tc.gid})
		if err != nil {
			t.Fatal(err)
		}
		st := fake.Pane(got.Pane)
		if st.Env["HERDBRIDGE_NAME"] != tc.name || st.Env["HERDBRIDGE_ROLE"] != "worker" || st.Env["HERDBRIDGE_STATE_DIR"] != "/state" || st.Env["HERDBRIDGE_SPAWN_ID"] != tc.gid {
			t.Errorf("%s: identity env %v", tc.profile, st.Env)
		}
		if v, set := st.Env["GEMINI_CLI_TRUST_WORKSPACE"]; v != tc.trust || (tc.trust == "") == set {
			t.Errorf("%s: GEMINI_CLI_TRUST_WORKSPACE=%q (set %v), want %q", tc.profile, v, set, tc.trust)
		}
		if st.Agent != profiles[tc.profile].Kind || !st.InteractiveReady {
			t.Errorf("%s: pane %+v", tc.profile, st)
		}
		var args []any
		for _, r := range requests(t, fake, "agent.start") {
			if r["pane_id"] == got.Pane {
				args, _ = r["args"].([]any)
			}
		}
		if !slices.Equal(args, tc.args) {
			t.Errorf("%s: agent.start args %v, want %v", tc.profile, args, tc.args)
		}
	}
	if env := profiles["gem"].Env; len(env) != 1 || env["A"] != "1" {
		t.Errorf("the gem profile's env changed: %v", env)
	}
}
