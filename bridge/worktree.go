package bridge

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Worktrees for `worktree: true` spawns: a new git worktree of a repo the
// profile names, on a new branch herdbridge/<worker name>, in
// <WorktreeDir>/<worker name>. A spawn that fails removes the worktree it
// made; a worker that finishes leaves it (it may hold the worker's work).

// addWorktree makes the worktree for worker name of repo and returns its
// path.
func addWorktree(ctx context.Context, dir, repo, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("worktree dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Lstat(path); err == nil {
		return "", userErr("a worktree for %s already exists at %s: pick another name, or remove it (git worktree remove)", name, path)
	}
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "worktree", "add", "-b", "herdbridge/"+name, path, "HEAD").CombinedOutput()
	if err != nil {
		return "", userErr("git worktree add in %s failed: %s", repo, Clip(strings.TrimSpace(string(out))))
	}
	return path, nil
}

// removeWorktree undoes addWorktree (a spawn that failed after making it).
func removeWorktree(ctx context.Context, repo, path, name string) error {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "worktree", "remove", "--force", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("git worktree remove %s: %s", path, strings.TrimSpace(string(out)))
	}
	_ = exec.CommandContext(ctx, "git", "-C", repo, "branch", "-D", "herdbridge/"+name).Run()
	return nil
}
