package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/storedamage"
)

// TestRepairCommandMatrix runs the built binary: with each damage of each
// store the gateway exits 1 naming the file and `herdbridge repair`, never
// a panic or a fault; `repair` refuses while a gateway runs, salvages with
// none, and the gateway then starts (gateway.TestRepairThenDrain drains
// what was readable).
func TestRepairCommandMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real gateway processes")
	}
	bin := buildBinary(t)
	src := gatewaytest.TempDir(t)
	gp := startGatewayProc(t, bin, src)
	lead := procConn(t, gp, "lead", "primary")
	w := procConn(t, gp, "w", "worker")
	// a backlog, so state.db gets its pages of held messages at once (a
	// few held ones would wait SpillDelay in memory, and the gateway is
	// stopped right after)
	const n = 200
	for i := 0; i < n; i++ {
		w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": fmt.Sprintf("held %02d %s", i, strings.Repeat("y", 300))}, "confirmed")
	}
	lead.Client.Close()
	w.Client.Close()
	out, err := exec.Command(bin, "repair", "--state-dir", src).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a gateway is running") {
		t.Fatalf("repair beside a running gateway: %v\n%s", err, out)
	}
	_ = gp.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = gp.cmd.Process.Wait()

	for _, name := range []string{"state.db", "transport.db"} {
		for _, kind := range storedamage.Kinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dir := gatewaytest.TempDir(t)
				for _, f := range []string{"state.db", "transport.db"} {
					b, err := os.ReadFile(filepath.Join(src, f))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := storedamage.Apply(filepath.Join(dir, name), kind); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, "gateway", "--listen", "127.0.0.1:0", "--state-dir", dir, "--host-id", "crashhost", "--log-level", "warn")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("gateway on a damaged %s: %v\n%s", name, err, stderr.String())
				}
				msg := stderr.String()
				if strings.Contains(msg, "panic") || strings.Contains(msg, "fatal error") || !strings.Contains(msg, filepath.Join(dir, name)) ||
					!strings.Contains(msg, "herdbridge repair --state-dir "+dir) {
					t.Fatalf("gateway on a damaged %s said:\n%s", name, msg)
				}
				out, err := exec.Command(bin, "repair", "--state-dir", dir).CombinedOutput()
				if err != nil || !strings.Contains(string(out), name+": damaged") || !strings.Contains(string(out), "kept aside as") {
					t.Fatalf("repair: %v\n%s", err, out)
				}
				gp := startGatewayProc(t, bin, dir)
				gp.kill()
			})
		}
	}
}
