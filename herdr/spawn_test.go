package herdr

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

func TestProfileValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    Profile
		want string // "" = valid
	}{
		{Profile{Kind: "claude"}, ""},
		{Profile{Kind: "codex", Args: []string{"--model", "o3"}, Cwd: "/repo", Env: map[string]string{"ROLE": "w", "EMPTY": ""}}, ""},
		{Profile{Command: []string{"my-agent", "--flag"}, Cwd: "/srv"}, ""},
		{Profile{}, "set kind"},
		{Profile{Env: map[string]string{"A": "b"}}, "set kind"},
		{Profile{Kind: "claude", Command: []string{"claude"}}, "not both"},
		{Profile{Kind: "claude", Cwd: "repo"}, "must be absolute"},
		{Profile{Command: []string{"x"}, Cwd: "./x"}, "must be absolute"},
		{Profile{Kind: "claude", Env: map[string]string{"": "x"}}, "env key"},
		{Profile{Kind: "claude", Env: map[string]string{"A=B": "x"}}, "env key"},
		{Profile{Kind: "claude", Env: map[string]string{"A\x00": "x"}}, "env key"},
		{Profile{Kind: "claude", Env: map[string]string{"A": "x\x00y"}}, "NUL"},
		{Profile{Command: []string{"", "x"}}, "executable"},
	}
	for _, tc := range cases {
		err := tc.p.Validate("w")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.p, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `profile "w"`)):
			t.Errorf("%+v: err %v, want one saying %q", tc.p, err, tc.want)
		}
	}
}

// spawnedPane returns the pane the spawner opened, from its requests.
func spawnedPane(t *testing.T, fake *herdrtest.Server) string {
	t.Helper()
	for _, m := range []string{"agent.start", "pane.close"} {
		if rs := requests(t, fake, m); len(rs) > 0 {
			return rs[0]["pane_id"].(string)
		}
	}
	t.Fatal("no pane found in the requests")
	return ""
}

func TestSpawnerKindProfile(t *testing.T) {
	t.Parallel()
	// New shells stay busy for 300 ms (rc files): agent.start is retried.
	fake, c := newFake(t, herdrtest.WithStartDelay(100*time.Millisecond), herdrtest.WithShellStartup(300*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{}) // a workspace to open tabs in
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second}

	p := Profile{Kind: "claude", Args: []string{"--model", "opus"}, Cwd: "/repo", Env: map[string]string{"ROLE": "worker", "OVER": "profile"}}
	pane, err := sp.Start(t.Context(), p, "reviewer", map[string]string{"HB_GID": "g1", "OVER": "call"})
	if err != nil {
		t.Fatal(err)
	}
	st := fake.Pane(pane)
	if st.Agent != "claude" || st.Name != "reviewer" || !st.InteractiveReady || !Ready(st.Status) || st.LaunchPending || st.Cwd != "/repo" {
		t.Fatalf("spawned %+v", st)
	}
	if st.Env["ROLE"] != "worker" || st.Env["HB_GID"] != "g1" || st.Env["OVER"] != "call" {
		t.Fatalf("env %v", st.Env)
	}
	starts := requests(t, fake, "agent.start")
	if len(starts) < 2 {
		t.Fatalf("agent.start sent %d times; the busy shell should have been retried", len(starts))
	}
	if args, _ := starts[0]["args"].([]any); len(args) != 2 || args[1] != "opus" || starts[0]["kind"] != "claude" {
		t.Fatalf("agent.start params %v", starts[0])
	}
	if tc := requests(t, fake, "tab.create"); len(tc) != 1 || tc[0]["label"] != "reviewer" || tc[0]["focus"] != false {
		t.Fatalf("tab.create %v", tc)
	}

	// A name herdr does not take as an agent name: the agent is named after its pane.
	pane2, err := sp.Start(t.Context(), Profile{Kind: "codex"}, "Worker #2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := fake.Pane(pane2); st.Agent != "codex" || !strings.HasPrefix(st.Name, "hb-") || !agentNameRE.MatchString(st.Name) {
		t.Fatalf("spawned %+v", st)
	}
}

func TestSpawnerBusyOnce(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	fake.FailNextReply("agent.start", "agent_pane_busy", "agent target pane is not an available shell")
	pane, err := (&Spawner{Client: c, ReadyWait: 5 * time.Second}).Start(t.Context(), Profile{Kind: "claude"}, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(requests(t, fake, "agent.start")); n != 2 {
		t.Fatalf("agent.start sent %d times, want 2", n)
	}
	if fake.Pane(pane).Name != "a" {
		t.Fatalf("spawned %+v", fake.Pane(pane))
	}
}

func TestSpawnerBusyForever(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithShellStartup(time.Minute))
	fake.AddPane(herdrtest.PaneOptions{})
	start := time.Now()
	_, err := (&Spawner{Client: c, ReadyWait: 5 * time.Second}).Start(t.Context(), Profile{Kind: "claude"}, "a", nil)
	if !errors.Is(err, ErrAgentPaneBusy) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v", d)
	}
	pane := spawnedPane(t, fake)
	if !strings.Contains(err.Error(), pane) || !fake.Pane(pane).Closed {
		t.Fatalf("err %v; pane %+v must be named and closed", err, fake.Pane(pane))
	}
}

func TestSpawnerCommandProfile(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(100*time.Millisecond))
	fake.AddPane(herdrtest.PaneOptions{})
	sp := &Spawner{Client: c, ReadyWait: 5 * time.Second}

	pane, err := sp.Start(t.Context(), Profile{Command: []string{"claude", "--resume"}, Cwd: "/repo", Env: map[string]string{"ROLE": "w"}}, "job", map[string]string{"HB_GID": "g"})
	if err != nil {
		t.Fatal(err)
	}
	st := fake.Pane(pane)
	if !slices.Equal(st.Command, []string{"claude", "--resume"}) || st.Agent != "claude" || !Ready(st.Status) ||
		st.Label != "job" || st.Cwd != "/repo" || st.Env["ROLE"] != "w" || st.Env["HB_GID"] != "g" {
		t.Fatalf("spawned %+v", st)
	}
	la := requests(t, fake, "layout.apply")
	if len(la) != 1 || la[0]["tab_label"] != "job" || la[0]["focus"] != false || len(requests(t, fake, "agent.start")) != 0 {
		t.Fatalf("layout.apply %v", la)
	}

	// A wrapper with herdr's agent hint.
	pane, err = sp.Start(t.Context(), Profile{Command: []string{"sandbox", "codex"}, Env: map[string]string{"HERDR_AGENT": "codex"}}, "boxed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := fake.Pane(pane); st.Agent != "codex" {
		t.Fatalf("spawned %+v", st)
	}
}

func TestSpawnerNeverReady(t *testing.T) {
	t.Parallel()
	t.Run("launch pending", func(t *testing.T) {
		t.Parallel()
		fake, c := newFake(t, herdrtest.WithStartDelay(time.Hour))
		fake.AddPane(herdrtest.PaneOptions{})
		_, err := (&Spawner{Client: c, ReadyWait: 400 * time.Millisecond}).Start(t.Context(), Profile{Kind: "claude"}, "a", nil)
		pane := spawnedPane(t, fake)
		if err == nil || !strings.Contains(err.Error(), "stuck in launch_pending") || !strings.Contains(err.Error(), pane) {
			t.Fatalf("err %v", err)
		}
		if !fake.Pane(pane).Closed {
			t.Fatal("the stuck pane was left open")
		}
	})
	t.Run("blocked", func(t *testing.T) {
		t.Parallel()
		fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond))
		fake.AddPane(herdrtest.PaneOptions{})
		fake.SetTrustDialog(true) // the agent comes up on a trust dialog
		_, err := (&Spawner{Client: c, ReadyWait: 400 * time.Millisecond}).Start(t.Context(), Profile{Kind: "claude"}, "a", nil)
		if err == nil || !strings.Contains(err.Error(), "stuck in blocked") || !strings.Contains(err.Error(), "dialog") {
			t.Fatalf("err %v", err)
		}
		pane := spawnedPane(t, fake)
		if !fake.Pane(pane).Closed || len(fake.TypedIntoDialog(pane)) != 0 {
			t.Fatalf("pane %+v: must be closed, nothing typed into its dialog", fake.Pane(pane))
		}
	})
	t.Run("custom command never detected", func(t *testing.T) {
		t.Parallel()
		fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond))
		fake.AddPane(herdrtest.PaneOptions{})
		_, err := (&Spawner{Client: c, ReadyWait: 400 * time.Millisecond}).Start(t.Context(), Profile{Command: []string{"my-agent"}}, "a", nil)
		if err == nil || !strings.Contains(err.Error(), "stuck in no agent detected") {
			t.Fatalf("err %v", err)
		}
		if !fake.Pane(spawnedPane(t, fake)).Closed {
			t.Fatal("the stuck pane was left open")
		}
	})
	t.Run("command exits", func(t *testing.T) {
		t.Parallel()
		fake, c := newFake(t, herdrtest.WithStartDelay(300*time.Millisecond))
		fake.AddPane(herdrtest.PaneOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { // the command dies before herdr detects it
			for ctx.Err() == nil {
				for _, id := range fake.PaneIDs() {
					if st := fake.Pane(id); st.Command != nil && !st.Closed {
						fake.ExitPane(id)
						return
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		start := time.Now()
		_, err := (&Spawner{Client: c, ReadyWait: 5 * time.Second}).Start(t.Context(), Profile{Command: []string{"claude"}}, "a", nil)
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("err %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a dead pane took %v to notice (ReadyWait is 5s)", d)
		}
	})
}

func TestSpawnerNoWorkspace(t *testing.T) {
	t.Parallel()
	_, c := newFake(t)
	sp := &Spawner{Client: c, ReadyWait: time.Second}
	if _, err := sp.Start(t.Context(), Profile{Kind: "claude"}, "a", nil); err == nil || !strings.Contains(err.Error(), "no_active_workspace") {
		t.Fatalf("kind: %v", err)
	}
	if _, err := sp.Start(t.Context(), Profile{Command: []string{"x"}}, "a", nil); err == nil || !strings.Contains(err.Error(), "workspace_not_found") {
		t.Fatalf("command: %v", err)
	}
}
