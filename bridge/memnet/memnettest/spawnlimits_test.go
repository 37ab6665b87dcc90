package memnettest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// limited tunes a host to spawn with sp under limits.
func limited(sp *spawner, l bridge.SpawnLimits) func(*bridge.Config) {
	return func(cfg *bridge.Config) { cfg.Panes, cfg.Spawn = sp, l }
}

func spawnOK(t *testing.T, h *memnettest.Host, caller, profile, name string, ch bridge.SpawnChoice) *bridge.Result {
	t.Helper()
	r, err := h.Core.Spawn(ctx, caller, bridge.SpawnRequest{Profile: profile, Name: name, Choice: ch})
	if err != nil || r.Status != bridge.StatusConfirmed {
		t.Fatalf("spawn %s of %s: %+v %v", name, profile, r, err)
	}
	return r
}

// TestSpawnMaxWorkers: a spawn past the host's or the profile's
// maxWorkers fails at once naming the limit and the count; a removed
// worker frees its slot; a restart counts the workers it finds registered.
func TestSpawnMaxWorkers(t *testing.T) {
	sp := newSpawner("reviewer", "tester")
	l := bridge.SpawnLimits{MaxWorkers: 2, Profiles: map[string]bridge.ProfilePolicy{"reviewer": {MaxWorkers: 1}}}
	c := memnettest.New(t)
	b := c.Start("b", limited(sp, l))
	lead := b.Register(t, "lead", bridge.RolePrimary)

	r1 := spawnOK(t, b, lead.GID, "reviewer", "r1", bridge.SpawnChoice{})
	_, err := b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "reviewer", Name: "r2"})
	wantUserError(t, "past the profile's limit", err, "profile reviewer runs 1", "maxWorkers limit is 1")
	spawnOK(t, b, lead.GID, "tester", "t1", bridge.SpawnChoice{})
	_, err = b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "tester", Name: "t2"})
	wantUserError(t, "past the host's limit", err, "this host runs 2", "maxWorkers limit is 2")
	for _, name := range []string{"r2", "t2"} {
		if sp.worker(name).Name != "" {
			t.Fatalf("refused spawn %s started a pane", name)
		}
	}

	if err := b.Core.Remove(ctx, r1.SpawnID); err != nil {
		t.Fatal(err)
	}
	spawnOK(t, b, lead.GID, "reviewer", "r3", bridge.SpawnChoice{})

	b = c.Restart(b, limited(sp, l))
	_, err = b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "tester", Name: "t3"})
	wantUserError(t, "past the host's limit after a restart", err, "this host runs 2", "maxWorkers limit is 2")
}

// TestSpawnLastSlot: a spawn under way holds its slot, so a second one
// racing it for the last slot is refused at once; of spawns started
// together for one slot exactly one wins.
func TestSpawnLastSlot(t *testing.T) {
	sp := newSpawner("reviewer")
	c := memnettest.New(t)
	b := c.Start("b", limited(sp, bridge.SpawnLimits{MaxWorkers: 1}))
	lead := b.Register(t, "lead", bridge.RolePrimary)

	gate := make(chan struct{})
	sp.mu.Lock()
	sp.gates["slow"] = gate
	sp.mu.Unlock()
	done := make(chan *bridge.Result, 1)
	go func() {
		r, _ := b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "reviewer", Name: "slow"})
		done <- r
	}()
	<-sp.began // the slow spawn holds the slot, its pane not yet ready
	_, err := b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "reviewer", Name: "fast"})
	wantUserError(t, "racing a spawn under way", err, "this host runs 1", "maxWorkers limit is 1")
	close(gate)
	if r := <-done; r == nil || r.Status != bridge.StatusConfirmed {
		t.Fatalf("the spawn holding the slot: %+v", r)
	}
	if err := b.Core.Remove(ctx, sp.worker("slow").GID); err != nil {
		t.Fatal(err)
	}

	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "reviewer", Name: "racer-" + string(rune('a'+i))})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantUserError(t, "a racer that lost", err, "maxWorkers limit is 1")
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d spawns racing for one slot won, want exactly 1 (%v)", won, n, errs)
	}
}

// TestRemoteSpawnAtLimit: a SPAWN past the other host's limit comes back
// as FAILED with that host's reason at once, not as a wait run out.
func TestRemoteSpawnAtLimit(t *testing.T) {
	sp := newSpawner("reviewer")
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", limited(sp, bridge.SpawnLimits{MaxWorkers: 1}))
	lead := a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	memnettest.Eventually(t, "a sees b's profiles", func() bool { return a.SeesHost("b") })

	r, err := a.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Host: "b", Profile: "reviewer", Name: "w1"})
	if err != nil || r.Status != bridge.StatusConfirmed {
		t.Fatalf("first remote spawn: %+v %v", r, err)
	}
	if !slices.ContainsFunc(r.Phases, func(p bridge.SpawnPhase) bool { return p.Phase == bridge.PhaseSpawnSent }) {
		t.Fatalf("remote spawn phases %+v lack %q", r.Phases, bridge.PhaseSpawnSent)
	}
	if _, err := b.Core.Resolve("w1"); err != nil {
		t.Fatalf("b does not hold the worker it spawned: %v", err)
	}
	r, err = a.Core.RemoteSpawn(ctx, lead.GID, "b", bridge.SpawnBody{Profile: "reviewer", Name: "w2"}, uuid.NewString(), memnettest.MaxWait)
	if err != nil || r.Status != bridge.StatusFailed || len(r.Messages) != 1 || r.Messages[0].Kind != bridge.KindFailed {
		t.Fatalf("remote spawn past the limit: %+v %v, want failed with b's FAILED notice", r, err)
	}
	for _, want := range []string{"this host runs 1", "maxWorkers limit is 1"} {
		if !strings.Contains(r.Messages[0].Body, want) {
			t.Fatalf("refusal %q does not say %q", r.Messages[0].Body, want)
		}
	}
}

// TestSpawnChoice: a spawn's cwd must resolve (symlinks evaluated) under
// the profile's roots; model and args come only from its allowlists; a
// worktree is made of a named repo; the result lists the phases passed.
func TestSpawnChoice(t *testing.T) {
	dir := t.TempDir()
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t, filepath.Join(dir, "repo"))
	sp := newSpawner("dev", "broken")
	l := bridge.SpawnLimits{WorktreeDir: filepath.Join(dir, "worktrees"), Profiles: map[string]bridge.ProfilePolicy{
		"dev":    {Roots: []string{root}, Repos: map[string]string{"app": repo}, Models: []string{"opus"}, AllowArgs: []string{"--fast"}},
		"broken": {Repos: map[string]string{"app": repo}},
	}}
	c := memnettest.New(t)
	b := c.Start("b", limited(sp, l))
	lead := b.Register(t, "lead", bridge.RolePrimary)

	refused := []struct {
		name string
		ch   bridge.SpawnChoice
		want string
	}{
		{"outside the roots", bridge.SpawnChoice{Cwd: outside}, "outside profile dev's roots"},
		{"dot-dot out", bridge.SpawnChoice{Cwd: filepath.Join(root, "sub", "..", "..", "outside")}, "outside profile dev's roots"},
		{"symlink out", bridge.SpawnChoice{Cwd: filepath.Join(root, "escape")}, "outside profile dev's roots"},
		{"missing", bridge.SpawnChoice{Cwd: filepath.Join(root, "nope")}, "name an existing directory"},
		{"model not allowed", bridge.SpawnChoice{Model: "gpt-9"}, "allowed are opus"},
		{"arg not allowed", bridge.SpawnChoice{Args: []string{"--dangerously-skip-permissions"}}, "allowed are --fast"},
		{"unknown repo", bridge.SpawnChoice{Repo: "other", Worktree: true}, "allowed are app"},
		{"cwd and worktree", bridge.SpawnChoice{Repo: "app", Worktree: true, Cwd: root}, "exclude each other"},
	}
	for _, tc := range refused {
		_, err := b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "dev", Name: "x", Choice: tc.ch})
		wantUserError(t, tc.name, err, tc.want)
	}
	if w := sp.worker("x"); w.Name != "" {
		t.Fatalf("a refused choice started a pane: %+v", w)
	}

	r := spawnOK(t, b, lead.GID, "dev", "in-sub", bridge.SpawnChoice{Cwd: "sub", Model: "opus", Args: []string{"--fast"}})
	w := sp.worker("in-sub")
	realSub, _ := filepath.EvalSymlinks(filepath.Join(root, "sub"))
	if w.Cwd != realSub || !slices.Equal(w.Args, []string{"--model", "opus", "--fast"}) {
		t.Fatalf("pane asked for cwd %q args %q, want %q and the model and arg", w.Cwd, w.Args, realSub)
	}
	wantPhases(t, r, bridge.PhasePaneCreated, bridge.PhaseAgentStarted, bridge.PhaseReady, bridge.PhaseRegistered)

	r = spawnOK(t, b, lead.GID, "dev", "wt", bridge.SpawnChoice{Repo: "app", Worktree: true})
	w = sp.worker("wt")
	if w.Cwd != filepath.Join(l.WorktreeDir, "wt") {
		t.Fatalf("worktree spawn started in %q", w.Cwd)
	}
	if out, err := exec.Command("git", "-C", w.Cwd, "rev-parse", "--abbrev-ref", "HEAD").Output(); err != nil || string(out) != "herdbridge/wt\n" {
		t.Fatalf("worktree branch: %q %v", out, err)
	}
	wantPhases(t, r, bridge.PhaseWorktree, bridge.PhasePaneCreated, bridge.PhaseAgentStarted, bridge.PhaseReady, bridge.PhaseRegistered)

	// a spawn that fails removes the worktree it made
	r, err := b.Core.Spawn(ctx, lead.GID, bridge.SpawnRequest{Profile: "broken", Name: "wt2", Choice: bridge.SpawnChoice{Repo: "app", Worktree: true}})
	if err != nil || r.Status != bridge.StatusFailed {
		t.Fatalf("failing spawn: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(l.WorktreeDir, "wt2")); !os.IsNotExist(err) {
		t.Fatalf("the worktree of a failed spawn is left: %v", err)
	}
}

func wantPhases(t *testing.T, r *bridge.Result, want ...string) {
	t.Helper()
	var got []string
	last := int64(-1)
	for _, p := range r.Phases {
		got = append(got, p.Phase)
		if p.MS < last {
			t.Fatalf("phase times go back: %+v", r.Phases)
		}
		last = p.MS
	}
	if !slices.Equal(got, want) {
		t.Fatalf("phases %q, want %q", got, want)
	}
}

// gitRepo makes a git repository with one commit at dir.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q", dir},
		{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}
