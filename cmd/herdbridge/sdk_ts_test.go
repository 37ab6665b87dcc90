package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestTypeScriptSDK drives a real gateway process with a real third-party
// client, the official MCP TypeScript SDK: testdata/sdk-ts/flows.mjs connects a
// primary over streamable HTTP and a worker over stdio (`herdbridge mcp`) and
// runs the main flows. It needs node and npm: without them it skips locally
// and fails in CI (CI set), so CI never silently skips it.
func TestTypeScriptSDK(t *testing.T) {
	node, npm := needNode(t, "the TypeScript SDK test")
	sdkDir := npmTestdata(t, npm, "sdk-ts", "@modelcontextprotocol/sdk")

	bin := filepath.Join(t.TempDir(), "herdbridge")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	dir := gatewaytest.TempDir(t) // the unix socket path must stay under ~100 bytes
	gw := startSDKGateway(t, bin, dir)

	reg := exec.Command(bin, "register", "--name", "sdk-primary", "--role", "primary", "--state-dir", dir)
	out, err := reg.Output()
	if err != nil {
		t.Fatalf("register: %v\n%s%s", err, out, sdkStderrOf(err))
	}
	var r struct {
		Name, Token, URL string
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Token == "" || !strings.HasSuffix(r.URL, "/mcp") {
		t.Fatalf("register printed %q (%v)", out, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "flows.mjs", bin, dir, r.URL, r.Token, r.Name)
	cmd.Dir = sdkDir
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err = cmd.CombinedOutput()
	t.Logf("node flows.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || !strings.Contains(string(out), "sdk flows ok") {
		t.Errorf("gateway log:\n%s", gw.log())
		t.Fatalf("node flows.mjs: %v (ctx %v)", err, ctx.Err())
	}
}

func sdkErrString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

func sdkStderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// sdkGatewayProc is a `herdbridge gateway` child process (its stderr kept).
type sdkGatewayProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func (g *sdkGatewayProc) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// startSDKGateway runs the gateway binary on 127.0.0.1:0 (with extra
// flags) and waits for its banner; the cleanup stops it (SIGTERM, then kill).
func startSDKGateway(t *testing.T, bin, dir string, extra ...string) *sdkGatewayProc {
	t.Helper()
	g := &sdkGatewayProc{done: make(chan struct{})}
	g.cmd = exec.Command(bin, append([]string{"gateway", "--listen", "127.0.0.1:0", "--state-dir", dir, "--host-id", "sdkhost"}, extra...)...)
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	ready := make(chan string, 1)
	go func() {
		defer close(g.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.buf.WriteString(line + "\n")
			g.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, "herdbridge gateway on "); ok {
				select {
				case ready <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	exited := make(chan error, 1)
	go func() { <-g.done; exited <- g.cmd.Wait() }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = g.cmd.Process.Kill()
			<-exited
			t.Errorf("gateway did not stop on SIGTERM within 10s; killed. log:\n%s", g.log())
		}
	})
	select {
	case url := <-ready:
		t.Logf("gateway %s on %s (pid %d)", dir, url, g.cmd.Process.Pid)
	case err := <-exited:
		exited <- err
		t.Fatalf("gateway exited before serving: %v\n%s", err, g.log())
	case <-time.After(15 * time.Second):
		t.Fatalf("gateway did not print its banner within 15s:\n%s", g.log())
	}
	return g
}
