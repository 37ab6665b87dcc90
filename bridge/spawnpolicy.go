package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Spawn policy: what a caller of bridge_spawn may choose beyond the profile
// name, and how many workers may run. The profile stays the only source of
// a command line; a caller picks a cwd under the profile's roots, a repo
// worktree, a model and extra args only from the profile's allowlists.

// SpawnLimits bounds spawning on this host.
type SpawnLimits struct {
	// MaxWorkers caps the spawned workers registered on this host at once,
	// across profiles (0: no cap).
	MaxWorkers int
	// Profiles holds each profile's own policy, by profile name.
	Profiles map[string]ProfilePolicy
	// WorktreeDir is where worktrees for `worktree: true` spawns are made
	// (one directory per worker name); empty: worktrees are refused.
	WorktreeDir string
}

// ProfilePolicy is one profile's limits and allowlists, read from the
// profile's entry in the gateway's configuration.
type ProfilePolicy struct {
	// MaxWorkers caps this profile's workers registered at once (0: only
	// the host's cap).
	MaxWorkers int `json:"maxWorkers,omitempty"`
	// Roots are the directories a spawn may choose its cwd under (the
	// chosen path, its symlinks evaluated, must be one of them or inside
	// one). None: the cwd is the profile's own.
	Roots []string `json:"roots,omitempty"`
	// Repos are the git repositories a spawn may name for `worktree: true`
	// (or as its cwd), by name.
	Repos map[string]string `json:"repos,omitempty"`
	// Models are the models a spawn may choose; the choice is passed to
	// the agent as "--model <model>".
	Models []string `json:"models,omitempty"`
	// AllowArgs are the extra arguments a spawn may add, each one exactly.
	AllowArgs []string `json:"allowArgs,omitempty"`
}

// Validate checks a profile's policy from the configuration.
func (p ProfilePolicy) Validate(name string) error {
	if p.MaxWorkers < 0 {
		return fmt.Errorf("profile %q: maxWorkers %d is negative", name, p.MaxWorkers)
	}
	for _, r := range p.Roots {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("profile %q: root %q must be absolute", name, r)
		}
	}
	for n, r := range p.Repos {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("profile %q: repo %s: %q must be absolute", name, n, r)
		}
		if !ValidName(n) {
			return fmt.Errorf("profile %q: repo name %q: letters, digits, '.', '_', '-'", name, n)
		}
	}
	return nil
}

// SpawnChoice is what a caller chose for a spawn beyond the profile.
type SpawnChoice struct {
	Cwd      string   `json:"cwd,omitempty"`
	Repo     string   `json:"repo,omitempty"`
	Worktree bool     `json:"worktree,omitempty"`
	Model    string   `json:"model,omitempty"`
	Args     []string `json:"args,omitempty"`
}

// spawnPlan is a choice checked against the policy: the cwd to start in
// (empty: the profile's), the args to add, and the repo a worktree is
// made of.
type spawnPlan struct {
	cwd      string
	args     []string
	worktree string // the repo path to make a worktree of, "" for none
}

// plan checks ch against profile's policy.
func (l SpawnLimits) plan(profile string, ch SpawnChoice) (spawnPlan, error) {
	pol := l.Profiles[profile]
	var p spawnPlan
	if ch.Model != "" {
		if !slices.Contains(pol.Models, ch.Model) {
			return p, userErr("model %s is not allowed for profile %s: %s", Clip(ch.Model), profile, allowed(pol.Models, "models"))
		}
		p.args = append(p.args, "--model", ch.Model)
	}
	for _, a := range ch.Args {
		if !slices.Contains(pol.AllowArgs, a) {
			return p, userErr("arg %s is not allowed for profile %s: %s", Clip(a), profile, allowed(pol.AllowArgs, "allowArgs"))
		}
		p.args = append(p.args, a)
	}
	var err error
	switch {
	case ch.Worktree || ch.Repo != "":
		p.cwd, p.worktree, err = l.repoCwd(profile, pol, ch)
	case ch.Cwd != "":
		p.cwd, err = underRoots(profile, pol.Roots, ch.Cwd)
	}
	return p, err
}

// repoCwd is the cwd of a spawn naming a repo: the repo itself, or (with
// worktree) the repo whose worktree is to be made.
func (l SpawnLimits) repoCwd(profile string, pol ProfilePolicy, ch SpawnChoice) (cwd, worktree string, err error) {
	if ch.Cwd != "" {
		return "", "", userErr("cwd and repo/worktree exclude each other: a worktree is made in %s", l.WorktreeDir)
	}
	if ch.Repo == "" {
		return "", "", userErr("worktree needs repo: the name of one of profile %s's repos (%s)", profile, strings.Join(repoNames(pol), ", "))
	}
	path, ok := pol.Repos[ch.Repo]
	if !ok {
		return "", "", userErr("no repo %s for profile %s: %s", Clip(ch.Repo), profile, allowed(repoNames(pol), "repos"))
	}
	if !ch.Worktree {
		return path, "", nil
	}
	if l.WorktreeDir == "" {
		return "", "", userErr("this gateway makes no worktrees (it has no state dir for them): spawn in the repo without worktree")
	}
	return "", path, nil
}

func repoNames(pol ProfilePolicy) []string {
	out := make([]string, 0, len(pol.Repos))
	for n := range pol.Repos {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func allowed(list []string, field string) string {
	if len(list) == 0 {
		return "it allows none (add them under \"" + field + "\" in the profile's configuration)"
	}
	return "allowed are " + strings.Join(list, ", ")
}

// underRoots resolves dir (absolute, or relative to the first root) with
// its symlinks evaluated and returns it when it is one of roots or inside
// one; ".." or a symlink leading out is refused.
func underRoots(profile string, roots []string, dir string) (string, error) {
	if len(roots) == 0 {
		return "", userErr("profile %s allows no cwd choice: add \"roots\" to the profile's configuration, or spawn without cwd", profile)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(roots[0], dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", userErr("cwd %s: %v: name an existing directory under %s", Clip(dir), unwrapPath(err), strings.Join(roots, ", "))
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", userErr("cwd %s is not a directory", Clip(dir))
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue // a root that does not exist holds nothing
		}
		if within(rr, real) {
			return real, nil
		}
	}
	return "", userErr("cwd %s (resolved: %s) is outside profile %s's roots: %s", Clip(dir), Clip(real), profile, strings.Join(roots, ", "))
}

// within reports whether path is root or inside it (both cleaned, absolute).
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// unwrapPath is err without the path it repeats (the message names it).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
