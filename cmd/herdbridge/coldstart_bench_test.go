package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// BenchmarkColdStart is issue 15's cold start: an MCP client launching
// `herdbridge mcp` to the tools listed (initialize + tools/list answered),
// with the gateway already running (mcp-running, target ≤ 100 ms) and with
// no gateway, which `herdbridge mcp` then auto-starts (mcp-autostart,
// target ≤ 1 s). The baseline in the same run is launching the same binary
// for `herdbridge version` (version): what any Go binary of this size
// costs to exec. Teardown (the relay's exit, the gateway's stop) is
// outside the timer.
func BenchmarkColdStart(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("finds auto-started gateways in /proc")
	}
	bin := buildBinary(b)
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(bin, "version").Output(); err != nil || len(out) == 0 {
				b.Fatalf("herdbridge version: %v %q", err, out)
			}
		}
	})
	b.Run("mcp-running", func(b *testing.B) {
		dir := gatewaytest.TempDir(b)
		startGatewayProcess(b, bin, dir)
		i := 0
		for b.Loop() {
			i++
			p := startMCPProc(b, bin, "--name", fmt.Sprintf("cold%d", i), "--role", "worker", "--state-dir", dir, "--no-start")
			coldListed(b, p)
			b.StopTimer()
			p.stop(b)
			b.StartTimer()
		}
	})
	b.Run("mcp-autostart", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dir := gatewaytest.TempDir(b)
			killAutoStarted(b, dir)
			b.StartTimer()
			p := startMCPProc(b, bin, "--name", "cold", "--role", "worker", "--state-dir", dir)
			coldListed(b, p)
			b.StopTimer()
			if !strings.Contains(p.Stderr(), "started a gateway for "+dir) {
				b.Fatalf("the relay did not start the gateway: %q", p.Stderr())
			}
			p.stop(b)
			stopAutoStarted(b, dir)
			b.StartTimer()
		}
	})
}

// coldListed fails unless the tools came back.
func coldListed(b *testing.B, p *mcpProc) {
	if names := p.listTools(b); !strings.Contains(strings.Join(names, ","), "bridge_send") {
		b.Fatalf("tools/list: %v", names)
	}
}

// stop closes the relay's stdin and waits for it to exit.
func (p *mcpProc) stop(t testing.TB) {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("herdbridge mcp did not exit on EOF: %s", p.Stderr())
	}
}

// stopAutoStarted stops the gateways running on dir and waits until they
// are gone, so the next iteration starts from none.
func stopAutoStarted(b *testing.B, dir string) {
	for _, pid := range gatewayPIDs(dir) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(gatewayPIDs(dir)) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("gateway on %s still running 10 s after SIGTERM", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
