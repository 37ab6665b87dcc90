package herdr

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestSpawnerAsPaneStarter: the core names a profile and a worker; the
// spawner starts the profile with the environment the worker's
// `herdbridge mcp` reads, and says which groups it joins.
func TestSpawnerAsPaneStarter(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second, StateDir: "/state",
		Profiles: map[string]Profile{"rev": {Kind: "claude", Groups: []string{"review", "ci"}}, "a": {Command: []string{"x"}}}}
	if got := sp.ProfileNames(); !slices.Equal(got, []string{"a", "rev"}) {
		t.Fatalf("profile names %v", got)
	}
	got, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: "rev", Name: "reviewer", GID: "0b3c0000-0000-4000-8000-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	st := fake.Pane(got.Pane)
	want := map[string]string{"HERDBRIDGE_NAME": "reviewer", "HERDBRIDGE_ROLE": "worker", "HERDBRIDGE_STATE_DIR": "/state",
		"HERDBRIDGE_SPAWN_ID": "0b3c0000-0000-4000-8000-000000000001", "HERDBRIDGE_GROUPS": "review,ci"}
	for k, v := range want {
		if st.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, st.Env[k], v)
		}
	}
	if !slices.Equal(got.Groups, []string{"review", "ci"}) {
		t.Errorf("groups %v", got.Groups)
	}
	if err := sp.ClosePane(t.Context(), got.Pane); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.StartPane(t.Context(), bridge.PaneWorker{Profile: "nope", Name: "x"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown profile: %v", err)
	}
}
