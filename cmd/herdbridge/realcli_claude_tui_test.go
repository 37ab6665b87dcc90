package main

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// TestClaudeCodeTUI: the interactive Claude Code (in a pseudo-terminal,
// through util-linux script(1)) after only `herdbridge setup claude`: no
// "New MCP server found" dialog and no permission dialog for a bridge tool —
// what a worker in a herdr pane would otherwise sit on, `blocked`. The
// person's own state (onboarding done, the folder trusted, the API key
// accepted) is seeded in ~/.claude.json, as it is for anyone who has used
// Claude Code once. With --no-allow the approval dialog comes up; without
// the allow rule the call never ran (the TUI's auto mode held it).
func TestClaudeCodeTUI(t *testing.T) {
	scriptExe, err := exec.LookPath("script")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("script(1) (util-linux) is needed for the Claude Code TUI test")
		}
		t.Skip("no script(1)")
	}
	f := newClaudeFixture(t)
	f.setup(t, "--name", "lead")
	seedClaudeState(t, f.home, f.proj, "sk-ant-fake")
	rec := &fakemodel.Record{}
	srv := httptest.NewServer(fakemodel.NewAnthropic(fakemodel.Sequence("all done",
		fakemodel.ToolCall{Name: "ToolSearch", Args: map[string]any{"query": "select:" + claudeTools + "bridge_roster"}},
		fakemodel.ToolCall{Name: claudeTools + "bridge_roster", Args: map[string]any{}},
	), rec))
	defer srv.Close()

	cmd := exec.Command(scriptExe, "-qfec", f.exe, "/dev/null")
	cmd.Dir = f.proj
	cmd.Env = append(claudeEnv(f.home, srv.URL), "TERM=xterm-256color", "COLUMNS=120", "LINES=40")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // script and the claude under it: stopped together
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	screen := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = screen, screen
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	// stop asks Claude Code to exit (script(1) runs it in a session of its
	// own, so killing script's group would leave it writing to HOME while
	// the test removes it), and kills what is left after 10 s.
	stop := func() {
		once.Do(func() {
			_, _ = io.WriteString(stdin, "\x1b/exit\r")
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			stdin.Close()
		})
	}
	defer stop()
	text := func() string { return plainScreen(screen.String()) }
	waitFor := func(what string, ok func() bool) bool {
		for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if ok() {
				return true
			}
		}
		t.Errorf("no %s within 45 s; screen:\n%s", what, tail(text(), 3000))
		return false
	}
	if !waitFor("prompt", func() bool {
		return strings.Contains(text(), "shift+tab") || strings.Contains(text(), "New MCP server")
	}) {
		return
	}
	if strings.Contains(text(), "New MCP server") {
		t.Fatalf("the TUI asks to approve the server:\n%s", tail(text(), 2000))
	}
	time.Sleep(time.Second) // the prompt is drawn before it takes keys
	_, _ = io.WriteString(stdin, "use the bridge")
	time.Sleep(300 * time.Millisecond)
	// a TUI may swallow an Enter (herdr's API notes say so of Claude Code):
	// press it again while no request reached the model
	for i := 0; i < 4 && len(rec.Turns()) == 0; i++ {
		_, _ = io.WriteString(stdin, "\r")
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(rec.Turns()) == 0; {
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("roster result", func() bool { return len(rec.LastResults()) >= 2 || strings.Contains(text(), "Do you want") })
	stop()
	seen := rec.LastResults()
	if strings.Contains(text(), "Do you want") || len(seen) < 2 || seen[1].IsError || !strings.Contains(seen[1].Content, `"lead"`) {
		t.Fatalf("results %+v\nscreen:\n%s", seen, tail(text(), 3000))
	}
}

// seedClaudeState writes what a person's ~/.claude.json holds after
// Claude Code's first start: onboarding done, proj trusted, key accepted.
func seedClaudeState(t *testing.T, home, proj, key string) {
	t.Helper()
	state := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}},
		"projects":               map[string]any{proj: map[string]any{"hasTrustDialogAccepted": true}},
	}
	b, _ := json.Marshal(state)
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>78]`)

// plainScreen is terminal output without its escape sequences.
func plainScreen(s string) string { return ansi.ReplaceAllString(s, " ") }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
