package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// geminiTool is a bridge tool's name as Gemini CLI offers it to the model:
// mcp_<server>_<tool>.
func geminiTool(tool string) string { return "mcp_herdbridge_" + tool }

// TestGeminiCLIHeadless runs the pinned Gemini CLI (testdata/clis/gemini)
// headless (`gemini -p`) against a real gateway, configured by nothing but
// `herdbridge setup gemini` in a temp HOME (whose settings.json already
// holds the person's own choice of API-key login, which setup must keep).
// The scripted model lists the roster, briefs a worker with wait_s and gets
// its reply (replied), drains a held note (drained), and long-polls past the
// gateway's lowered --max-wait (pending). No approval flag is passed: without
// setup's trust the tools would not even be offered. The run's identity comes
// from HERDBRIDGE_NAME in Gemini's own environment, as a spawned worker's
// does: Gemini must pass it to `herdbridge mcp`.
func TestGeminiCLIHeadless(t *testing.T) {
	bin := buildBinary(t)
	state := gatewaytest.TempDir(t)
	gp := startGatewayProcArgs(t, bin, state, "gemhost", "--max-wait", "3s")
	cliDir, proj, home := geminiSetup(t, bin, state)
	answerBrief(t, procConn(t, gp, "peer", "worker"), "gemlead")

	model, err := runGemini(t, cliDir, proj, home, []string{"HERDBRIDGE_NAME=gemlead"}, fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: geminiTool("bridge_roster"), Args: map[string]any{}},
		fakemodel.ToolCall{Name: geminiTool("bridge_send"), Args: map[string]any{"target": "peer", "message": "brief one: say hi", "wait_s": 20}},
		fakemodel.ToolCall{Name: geminiTool("bridge_poll"), Args: map[string]any{"wait_s": 10}},
		fakemodel.ToolCall{Name: geminiTool("bridge_poll"), Args: map[string]any{"wait_s": 10}},
	))
	checkGeminiSeen(t, model.LastResults(), err)
}

// runGemini runs the pinned Gemini CLI headless in proj with HOME home and
// env, against a scripted model; it returns the model (its record) and the
// run's error.
func runGemini(t *testing.T, cliDir, proj, home string, env []string, script fakemodel.Script) (*fakemodel.Gemini, error) {
	t.Helper()
	model := fakemodel.NewGemini(script)
	t.Cleanup(model.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// --skip-trust: Gemini runs headless only in a trusted folder, and this
	// temp project is not one (the person's own flag, not a config edit).
	cmd := exec.CommandContext(ctx, filepath.Join(cliDir, "node_modules", ".bin", "gemini"), "--skip-trust", "-p", "use the bridge")
	cmd.Dir = proj
	cmd.Env = cliEnv(home, append([]string{"GEMINI_API_KEY=fake-key", "GOOGLE_GEMINI_BASE_URL=" + model.URL}, env...)...)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("gemini -p (%v): %v\n%s\nrequests: %q", time.Since(start).Round(time.Millisecond), err, out, model.Paths())
	return model, err
}

// geminiSetup installs the pinned Gemini CLI (npm ci) and runs `herdbridge
// setup gemini` in a temp HOME whose settings.json holds the person's own
// choice of API-key login; it returns the CLI dir, a project dir and HOME.
func geminiSetup(t *testing.T, bin, state string) (cliDir, proj, home string) {
	t.Helper()
	_, npm := needNode(t, "the Gemini CLI test")
	cliDir = npmTestdata(t, npm, filepath.Join("clis", "gemini"), "@google/gemini-cli")
	proj, home = t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`)
	setup := exec.Command(bin, "setup", "gemini", "--name", "lead", "--state-dir", state, "--command", bin)
	setup.Dir, setup.Env = proj, cliEnv(home)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup gemini: %v\n%s", err, out)
	}
	settings, _ := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	t.Logf("settings.json:\n%s", settings)
	return cliDir, proj, home
}

// checkGeminiSeen checks what the model saw: each result is a
// functionResponse {"output": text}, the text fenced in <untrusted_context>
// (Gemini shows no structuredContent), with the statuses and the peer's
// words, under the name from Gemini's environment.
func checkGeminiSeen(t *testing.T, seen []fakemodel.Seen, runErr error) {
	t.Helper()
	if runErr != nil || len(seen) != 4 {
		t.Fatalf("gemini -p: %v; %d tool results, want 4: %+v", runErr, len(seen), seen)
	}
	logPayload(t, "gemini", "replied", seen[1].Content)
	logPayload(t, "gemini", "drained", seen[2].Content)
	logPayload(t, "gemini", "pending", seen[3].Content)
	want := []struct{ tool, has string }{
		{"bridge_roster", "gemlead@"}, {"bridge_send", "hi from peer"}, {"bridge_poll", "a note from peer"}, {"bridge_poll", "pending"},
	}
	for i, s := range seen {
		t.Logf("the model saw for %s:\n%s", s.Tool, s.Content)
		var resp struct {
			Output string `json:"output"`
		}
		if err := json.Unmarshal([]byte(s.Content), &resp); err != nil || s.Tool != geminiTool(want[i].tool) {
			t.Errorf("result %d (%s): not {\"output\": …}: %s", i, s.Tool, s.Content)
			continue
		}
		if !strings.HasPrefix(resp.Output, "<untrusted_context>") || !strings.Contains(resp.Output, want[i].has) {
			t.Errorf("result %d (%s): want %q inside <untrusted_context>, got %q", i, s.Tool, want[i].has, resp.Output)
		}
		if strings.Contains(resp.Output, "error") && !strings.Contains(want[i].has, "error") {
			t.Errorf("result %d (%s) is an error: %q", i, s.Tool, resp.Output)
		}
	}
	for _, s := range []string{"replied", "drained"} {
		if !strings.Contains(seen[1].Content+seen[2].Content, s) {
			t.Errorf("no %s in what the model saw for the send and the first poll", s)
		}
	}
	if strings.Contains(seen[0].Content, "lead@") && !strings.Contains(seen[0].Content, "gemlead@") {
		t.Errorf("roster shows the setup default name, not Gemini's HERDBRIDGE_NAME: %s", seen[0].Content)
	}
}
