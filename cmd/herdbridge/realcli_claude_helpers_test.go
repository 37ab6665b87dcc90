package main

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// claudeCLI returns the pinned Claude Code executable (testdata/clis/claude,
// `npm ci` when its node_modules does not hold the pinned version). Claude
// Code ships as a native binary: its postinstall links it to bin/claude.exe;
// when npm did not run the script, the platform package's binary is the same.
func claudeCLI(t *testing.T) string {
	t.Helper()
	_, npm := needNode(t, "the Claude Code real-CLI test")
	dir := npmTestdata(t, npm, filepath.Join("clis", "claude"), "@anthropic-ai/claude-code")
	exe := filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe")
	if st, err := os.Stat(exe); err == nil && st.Size() > 1<<20 {
		return exe
	}
	plat := "claude-code-" + runtime.GOOS + "-" + map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	exe = filepath.Join(dir, "node_modules", "@anthropic-ai", plat, "claude")
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("no Claude Code binary in %s: %v", dir, err)
	}
	return exe
}

// claudeRun is one headless `claude -p` run against the fake model.
type claudeRun struct {
	Exe    string // claudeCLI's answer
	Dir    string // the project directory it runs in
	Home   string // its $HOME (~/.claude, ~/.claude.json)
	Prompt string // the user's prompt
	Script fakemodel.Script
	Args   []string      // extra claude flags (the test adds no permission flags)
	Env    []string      // extra environment
	Limit  time.Duration // the whole run (default 2 minutes)
}

// claudeResult is what a run left: the model's record, Claude Code's
// stdout and stderr, and the exit error.
type claudeResult struct {
	Record  *fakemodel.Record
	Unknown []string // API requests the fake did not serve
	Stdout  string
	Stderr  string
	Err     error
}

// runClaude runs Claude Code headless (`claude -p`) in r.Dir with only
// what is in r.Dir and r.Home configuring it, the model API at a fake
// server answering r.Script, and returns the record of what the model saw.
// It is reusable by a cross-CLI test: the script decides everything.
func runClaude(t *testing.T, r claudeRun) claudeResult {
	t.Helper()
	rec := &fakemodel.Record{}
	api := fakemodel.NewAnthropic(r.Script, rec)
	srv := httptest.NewServer(api)
	defer srv.Close()
	limit := r.Limit
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Exe, append([]string{"-p", r.Prompt}, r.Args...)...)
	cmd.Dir = r.Dir
	cmd.Env = append(claudeEnv(r.Home, srv.URL), r.Env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("claude -p in %s: %v (err %v)", r.Dir, time.Since(start).Round(time.Millisecond), err)
	if u := api.Unknown(); len(u) > 0 {
		t.Logf("requests the fake model did not serve: %v", u)
	}
	return claudeResult{Record: rec, Unknown: api.Unknown(), Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}

// claudeEnv is a clean environment for Claude Code: this process's, without
// anything that would give the run an identity, a model or a config of its
// own (HERDBRIDGE_*, HERDR_*, ANTHROPIC_*, CLAUDE*), HOME in a temp dir, and
// no network but the fake model (no updater, telemetry or error reports).
func claudeEnv(home, api string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "HERDBRIDGE_"), strings.HasPrefix(k, "HERDR_"), strings.HasPrefix(k, "ANTHROPIC_"),
			strings.HasPrefix(k, "CLAUDE"), k == "HOME", k == "XDG_CONFIG_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "ANTHROPIC_BASE_URL="+api, "ANTHROPIC_API_KEY=sk-ant-fake",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
}
