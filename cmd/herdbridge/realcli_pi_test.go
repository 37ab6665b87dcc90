package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// piTool is a bridge tool's name as pi-mcp-adapter registers it as a direct
// tool (toolPrefix "server": <server>_<tool>).
func piTool(tool string) string { return "herdbridge_" + tool }

// piRun is one headless pi run (`pi -p`) in proj with HOME home, against a
// scripted Chat Completions model.
type piRun struct {
	cliDir, proj, home string
	env                []string
	script             fakemodel.Script
}

// run writes the person's own provider config for the fake model
// (~/.pi/agent/models.json) and runs pi in print mode with the pinned
// pi-mcp-adapter loaded (-e, as `pi install` would); it returns the record
// and the run's error and output.
func (r piRun) run(t *testing.T) (*fakemodel.Chat, error) {
	t.Helper()
	model := fakemodel.NewChat(r.script)
	t.Cleanup(model.Close)
	models := map[string]any{"providers": map[string]any{"fake": map[string]any{
		"baseUrl": model.URL + "/v1", "api": "openai-completions", "apiKey": "fake-key",
		"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
		"models": []any{map[string]any{"id": "scripted"}}}}}
	raw, _ := json.Marshal(models)
	writeFile(t, filepath.Join(r.home, ".pi", "agent", "models.json"), string(raw))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mods := filepath.Join(r.cliDir, "node_modules")
	cmd := exec.CommandContext(ctx, filepath.Join(mods, ".bin", "pi"), "--provider", "fake", "--model", "scripted", "--no-session",
		"-e", filepath.Join(mods, "pi-mcp-adapter"), "-p", "use the bridge")
	cmd.Dir = r.proj
	cmd.Env = cliEnv(r.home, append([]string{"PI_OFFLINE=1"}, r.env...)...)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("pi -p (%v): %v\n%s", time.Since(start).Round(time.Millisecond), err, out)
	return model, err
}

// piSetup installs the pinned pi (npm ci) and runs `herdbridge setup pi`
// in a temp project; it returns the CLI dir, the project and HOME.
func piSetup(t *testing.T, bin, state string) (cliDir, proj, home string) {
	t.Helper()
	_, npm := needNode(t, "the pi test")
	cliDir = npmTestdata(t, npm, filepath.Join("clis", "pi"), "@mariozechner/pi-coding-agent")
	proj, home = t.TempDir(), t.TempDir()
	setup := exec.Command(bin, "setup", "pi", "--name", "lead", "--state-dir", state, "--command", bin)
	setup.Dir, setup.Env = proj, cliEnv(home)
	out, err := setup.CombinedOutput()
	if err != nil {
		t.Fatalf("setup pi: %v\n%s", err, out)
	}
	t.Logf("setup pi:\n%s", out)
	return cliDir, proj, home
}

// TestPiHeadless runs the pinned pi with pi-mcp-adapter (testdata/clis/pi)
// in print mode against a real gateway, configured by `herdbridge setup pi`
// alone: the bridge tools are direct pi tools (not the adapter's one proxy
// tool), and the scripted model lists the roster, briefs a worker and gets
// its reply, drains a held note and long-polls past --max-wait (pending),
// under the name from pi's environment (a spawned worker's identity).
func TestPiHeadless(t *testing.T) {
	bin := buildBinary(t)
	state := gatewaytest.TempDir(t)
	gp := startGatewayProcArgs(t, bin, state, "pihost", "--max-wait", "3s")
	cliDir, proj, home := piSetup(t, bin, state)
	answerBrief(t, procConn(t, gp, "peer", "worker"), "pilead")
	model, err := piRun{cliDir: cliDir, proj: proj, home: home, env: []string{"HERDBRIDGE_NAME=pilead"}, script: fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: piTool("bridge_roster"), Args: map[string]any{}},
		fakemodel.ToolCall{Name: piTool("bridge_send"), Args: map[string]any{"target": "peer", "message": "brief one: say hi", "wait_s": 20}},
		fakemodel.ToolCall{Name: piTool("bridge_poll"), Args: map[string]any{"wait_s": 10}},
		fakemodel.ToolCall{Name: piTool("bridge_poll"), Args: map[string]any{"wait_s": 10}},
	)}.run(t)
	if turns := model.Turns(); len(turns) == 0 || !slices.Contains(turns[0].Tools, piTool("bridge_send")) {
		t.Errorf("the model was not offered %s as a direct tool: %v", piTool("bridge_send"), turns)
	}
	seen := model.LastResults()
	if err != nil || len(seen) != 4 {
		t.Fatalf("pi -p: %v; %d tool results, want 4: %+v", err, len(seen), seen)
	}
	logPayload(t, "pi", "replied", seen[1].Content)
	logPayload(t, "pi", "drained", seen[2].Content)
	logPayload(t, "pi", "pending", seen[3].Content)
	want := []struct{ tool, has string }{
		{"bridge_roster", "pilead@"}, {"bridge_send", "hi from peer"}, {"bridge_poll", "a note from peer"}, {"bridge_poll", "pending"},
	}
	for i, s := range seen {
		t.Logf("the model saw for %s:\n%s", s.Tool, s.Content)
		if s.Tool != piTool(want[i].tool) || !strings.Contains(s.Content, want[i].has) {
			t.Errorf("result %d (%s): want %q in %q", i, s.Tool, want[i].has, s.Content)
		}
	}
	if !strings.Contains(seen[1].Content, "replied") || !strings.Contains(seen[2].Content, "drained") {
		t.Errorf("send/poll statuses: %q / %q", seen[1].Content, seen[2].Content)
	}
}

// TestPiLongPoll: a 65 s bridge_poll on a gateway whose --max-wait is 90 s
// comes back in pi as `pending` before the MCP SDK's 60 s cut:
// pi-mcp-adapter sends no progress token and the gateway cannot read its
// requestTimeoutMs, so it caps a pi-mcp-* client's wait at 54 s. Without
// the cap the poll would wait 65 s (and be cut by a hand-written entry).
func TestPiLongPoll(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 65 s")
	}
	bin := buildBinary(t)
	state := gatewaytest.TempDir(t)
	startGatewayProcArgs(t, bin, state, "pilong", "--max-wait", "90s")
	cliDir, proj, home := piSetup(t, bin, state)
	start := time.Now()
	model, err := piRun{cliDir: cliDir, proj: proj, home: home, script: fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: piTool("bridge_poll"), Args: map[string]any{"wait_s": 65}},
	)}.run(t)
	seen := model.LastResults()
	if err != nil || len(seen) != 1 {
		t.Fatalf("pi -p: %v; %d tool results, want 1: %+v", err, len(seen), seen)
	}
	t.Logf("after %v the model saw:\n%s", time.Since(start).Round(time.Second), seen[0].Content)
	if !strings.Contains(seen[0].Content, `"status": "pending"`) || strings.Contains(strings.ToLower(seen[0].Content), "timed out") {
		t.Errorf("the 65 s poll did not come back pending: %q", seen[0].Content)
	}
	if !strings.Contains(seen[0].Content, "bridge_poll(wait_s=54)") { // the cap, not --max-wait's 90
		t.Errorf("the poll was not capped at pi's 54 s: %q", seen[0].Content)
	}
}
