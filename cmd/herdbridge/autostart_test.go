package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// autoEnv is the environment of a command that may start a gateway: on a
// free port, outside herdr.
func autoEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERDR_") && !strings.HasPrefix(kv, "HERDBRIDGE_") {
			env = append(env, kv)
		}
	}
	return append(env, "HERDBRIDGE_LISTEN=127.0.0.1:0")
}

// killAutoStarted stops, when the test ends, every gateway a command
// started on dir (its pid from gateway.json, and any other found running).
func killAutoStarted(t testing.TB, dir string) {
	t.Cleanup(func() {
		pids := gatewayPIDs(dir)
		if raw, err := os.ReadFile(filepath.Join(dir, gateway.InfoName)); err == nil {
			var info gateway.Info
			if json.Unmarshal(raw, &info) == nil && info.PID > 0 {
				pids = append(pids, info.PID)
			}
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, pid := range pids {
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) && len(gatewayPIDs(dir)) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// gatewayPIDs are the live `herdbridge gateway` processes on dir (Linux:
// /proc; elsewhere none).
func gatewayPIDs(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) > 3 && args[1] == "gateway" && args[2] == "--state-dir" && args[3] == dir {
			out = append(out, pid)
		}
	}
	return out
}

// mcpProc is a `herdbridge mcp` child process with an MCP client on its
// stdio.
type mcpProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
}

func (p *mcpProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *mcpProc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func startMCPProc(t testing.TB, bin string, args ...string) *mcpProc {
	t.Helper()
	p := &mcpProc{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"mcp"}, args...)...)
	p.cmd.Env = autoEnv()
	p.cmd.Stderr = p
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stdin.Close() // the relay ends on EOF
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// listTools initializes an MCP SDK client on p's stdio and lists the tools.
func (p *mcpProc) listTools(t testing.TB) []string {
	t.Helper()
	c := client.NewClient(transport.NewIO(p.stdout, p.stdin, io.NopCloser(strings.NewReader(""))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "coldstart", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v\nstderr: %s", err, p.Stderr())
	}
	res, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v\nstderr: %s", err, p.Stderr())
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestColdStart: with no gateway running, `mcp --no-start` fails clearly;
// two `herdbridge mcp` started at once start exactly one gateway (logging
// to gateway.log), both list the tools, and one says it started it.
func TestColdStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts gateway processes in /proc")
	}
	bin := buildBinary(t)
	dir := gatewaytest.TempDir(t)
	killAutoStarted(t, dir)

	cmd := exec.Command(bin, "mcp", "--name", "x", "--role", "worker", "--state-dir", dir, "--no-start")
	cmd.Env = autoEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no gateway answers") || !strings.Contains(string(out), "--no-start") {
		t.Fatalf("--no-start without a gateway: %v, %q", err, out)
	}

	procs := []*mcpProc{
		startMCPProc(t, bin, "--name", "a", "--role", "worker", "--state-dir", dir),
		startMCPProc(t, bin, "--name", "b", "--role", "worker", "--state-dir", dir),
	}
	var wg sync.WaitGroup
	tools := make([][]string, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); tools[i] = p.listTools(t) }()
	}
	wg.Wait()
	for i, names := range tools {
		if !strings.Contains(strings.Join(names, ","), "bridge_send") {
			t.Fatalf("mcp %d listed %v", i, names)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, gateway.LogName)); err != nil {
		t.Fatalf("no gateway.log: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, gateway.InfoName))
	var info gateway.Info
	if err != nil || json.Unmarshal(raw, &info) != nil || info.PID == 0 {
		t.Fatalf("gateway.json: %q %v", raw, err)
	}
	if pids := gatewayPIDs(dir); len(pids) != 1 || pids[0] != info.PID {
		t.Fatalf("gateway processes %v, gateway.json pid %d: want exactly that one", pids, info.PID)
	}
	notices := 0
	for _, p := range procs {
		if strings.Contains(p.Stderr(), "started a gateway for "+dir) {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("%d of 2 said they started the gateway: %q / %q", notices, procs[0].Stderr(), procs[1].Stderr())
	}
}

// TestNameRefusedAcrossProcesses: a second `herdbridge mcp` process taking
// a name a live one holds exits 1 with the error naming the holder and
// the way out (so is `register`); with --takeover it gets the name and
// the first exits.
func TestNameRefusedAcrossProcesses(t *testing.T) {
	bin := buildBinary(t)
	dir := gatewaytest.TempDir(t)
	killAutoStarted(t, dir)
	first := startMCPProc(t, bin, "--name", "dup", "--role", "worker", "--state-dir", dir)
	first.listTools(t)

	cmd := exec.Command(bin, "mcp", "--name", "dup", "--role", "worker", "--state-dir", dir)
	cmd.Env = autoEnv()
	out, err := cmd.CombinedOutput()
	want := "name \"dup\" is in use by a live session (pid " + strconv.Itoa(first.cmd.Process.Pid) + ", role worker)"
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--takeover") {
		t.Fatalf("second mcp: %v, %q; want %q", err, out, want)
	}

	reg := exec.Command(bin, "register", "--name", "dup", "--role", "worker", "--state-dir", dir)
	reg.Env = autoEnv()
	if out, err := reg.CombinedOutput(); err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("register of a held name: %v, %q", err, out)
	}

	second := startMCPProc(t, bin, "--name", "dup", "--role", "worker", "--state-dir", dir, "--takeover")
	second.listTools(t)
	select {
	case <-first.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the session taken over kept running")
	}
	if s := first.Stderr(); !strings.Contains(s, `lost the name "dup"`) {
		t.Fatalf("taken-over mcp said %q", s)
	}
}

// TestAutoStartFailureNamesTheLog: a gateway that cannot start (its port
// is taken) makes `mcp` fail at once, quoting gateway.log.
func TestAutoStartFailureNamesTheLog(t *testing.T) {
	bin := buildBinary(t)
	dir := gatewaytest.TempDir(t)
	killAutoStarted(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "mcp", "--name", "x", "--role", "worker", "--state-dir", dir)
	cmd.Env = append(autoEnv(), "HERDBRIDGE_LISTEN="+ln.Addr().String())
	out, err := cmd.CombinedOutput()
	for _, want := range []string{"no gateway answered", filepath.Join(dir, gateway.LogName), "address already in use"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("mcp with a gateway that cannot listen: %v, %q; want %q", err, out, want)
		}
	}
}
