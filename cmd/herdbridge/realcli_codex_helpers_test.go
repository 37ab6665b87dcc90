package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// codexVersion is the Codex CLI the real-CLI tests pin (testdata/clis/codex).
const codexVersion = "0.169.0"

// codexCLI is the pinned Codex CLI's launcher, installed with `npm ci` on
// first use (the registry is all it needs: the Linux binary comes as the
// optional dependency @openai/codex-linux-x64). Without node and npm the
// test skips, or fails in CI.
func codexCLI(t *testing.T) string {
	t.Helper()
	_, npm := needNode(t, "the Codex CLI test")
	dir := npmTestdata(t, npm, filepath.Join("clis", "codex"), "@openai/codex")
	bin := filepath.Join(dir, "node_modules", ".bin", "codex")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), codexVersion) {
		t.Fatalf("%s --version: %v\n%s (the platform package, an optional dependency, may be missing: npm ci in %s)", bin, err, out, dir)
	}
	return bin
}

// codexRun is one headless `codex exec` against the scripted model.
type codexRun struct {
	Codex      string           // codexCLI's launcher
	Herdbridge string           // the built herdbridge binary the MCP entry runs
	StateDir   string           // the gateway's state dir
	Name       string           // setup's --name (none: the run's Env/Args give the identity)
	Role       string           // setup's --role (default primary)
	NoSetup    bool             // no `herdbridge setup codex` (a spawned worker: Args carry the server)
	SetupArgs  []string         // more setup flags (e.g. --no-allow)
	Args       []string         // more codex arguments before the prompt (e.g. herdr.CodexWorkerArgs)
	Env        []string         // more environment (e.g. HERDBRIDGE_NAME of a worker)
	Prompt     string           // the user's prompt
	Script     fakemodel.Script // the model
	Timeout    time.Duration    // the whole run (default 2 minutes)
}

// codexRunResult is what came of a run: every request the model got (the
// tool results as the model saw them), the CLI's output, its CODEX_HOME.
type codexRunResult struct {
	Record *fakemodel.Record
	Output string
	Home   string
	Err    error
}

// runCodex runs `herdbridge setup codex` in a fresh CODEX_HOME (unless
// NoSetup), puts the test's model provider (the fake Responses server)
// in front of what setup wrote, and runs `codex exec` headless with no
// approval flag: whatever lets a bridge call through is setup's doing (or
// Args'). Reusable: a primary or a worker, any script; it never fails
// the test itself (a failure is in Err), so a test may run it in a
// goroutine beside another CLI and judge both.
func runCodex(t *testing.T, r codexRun) codexRunResult {
	t.Helper()
	rec := &fakemodel.Record{}
	model := httptest.NewServer(&fakemodel.Responses{Script: r.Script, Record: rec})
	defer model.Close()
	home := t.TempDir()
	env := codexEnv(home, r.StateDir, r.Env)
	if !r.NoSetup {
		args := []string{"setup", "codex", "--command", r.Herdbridge, "--state-dir", r.StateDir, "--role", cmp.Or(r.Role, "primary")}
		if r.Name != "" {
			args = append(args, "--name", r.Name)
		}
		setup := exec.Command(r.Herdbridge, append(args, r.SetupArgs...)...)
		setup.Env = env
		if out, err := setup.CombinedOutput(); err != nil {
			return codexRunResult{Record: rec, Output: string(out), Home: home, Err: fmt.Errorf("herdbridge setup codex: %w", err)}
		}
	}
	if err := writeCodexProvider(filepath.Join(home, "config.toml"), model.URL+"/v1"); err != nil {
		return codexRunResult{Record: rec, Home: home, Err: err}
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(r.Timeout, 2*time.Minute))
	defer cancel()
	args := append([]string{"exec", "--skip-git-repo-check", "--cd", work}, r.Args...)
	cmd := exec.CommandContext(ctx, r.Codex, append(args, r.Prompt)...)
	cmd.Env = env
	cmd.Dir = work
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("codex exec (%v), %d model requests", time.Since(start).Round(time.Millisecond), len(rec.Turns()))
	return codexRunResult{Record: rec, Output: string(out), Home: home, Err: err}
}

// codexEnv is a clean environment for the CLI: its own HOME and
// CODEX_HOME, PATH, nothing of the developer's Codex or herdbridge setup.
func codexEnv(home, stateDir string, extra []string) []string {
	env := []string{"HOME=" + home, "CODEX_HOME=" + home, "PATH=" + os.Getenv("PATH"), "HERDBRIDGE_STATE_DIR=" + stateDir, "LANG=C.UTF-8", "TERM=dumb"}
	return append(env, extra...)
}

// writeCodexProvider puts the test's own settings before the tables
// setup wrote (top-level keys must come first in TOML): the fake model as
// the provider, and nothing that would reach the network.
func writeCodexProvider(path, baseURL string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	url, _ := json.Marshal(baseURL)
	head := "# the real-CLI test's own settings: the scripted model, no network\n" +
		"model = \"fake-model\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\nweb_search = \"disabled\"\n\n" +
		"[model_providers.fake]\nname = \"fake\"\nbase_url = " + string(url) + "\nwire_api = \"responses\"\n" +
		"request_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n\n"
	return os.WriteFile(path, append([]byte(head), old...), 0o600)
}

// codexSeen is one tool result as the Codex model saw it: Codex prefixes
// the MCP result with "Wall time: … seconds\nOutput:\n" and gives the
// JSON of structuredContent; Payload is that JSON, Status its status.
type codexSeen struct {
	Tool    string
	Raw     string
	Payload string
	Status  string
}

func codexResults(t *testing.T, rec *fakemodel.Record) []codexSeen {
	t.Helper()
	var out []codexSeen
	for _, s := range rec.LastResults() {
		c := codexSeen{Tool: s.Tool, Raw: s.Content}
		if _, after, ok := strings.Cut(s.Content, "\nOutput:\n"); ok {
			c.Payload = after
			var v struct {
				Status string `json:"status"`
			}
			if json.Unmarshal([]byte(after), &v) == nil {
				c.Status = v.Status
			}
		}
		out = append(out, c)
	}
	return out
}
