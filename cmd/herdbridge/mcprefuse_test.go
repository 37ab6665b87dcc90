package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/mcp"
)

// lockedBuffer is a bytes.Buffer a logger and a test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMCPRefusalVisible: a second `herdbridge mcp --name lead` while a live
// session holds the name is refused, and says so where each party looks:
// the client gets the sentence as the JSON-RPC error of every request it
// sends (Claude Code's server/discover probe, initialize, a tools/call; not
// notifications), stderr gets it at once, the gateway's log gets a line,
// and the command still fails. Before, it exited at once and the client
// showed "Connection closed".
func TestMCPRefusalVisible(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	var glog lockedBuffer
	cfg := gatewaytest.LocalConfig(t, dir)
	cfg.Logger = slog.New(slog.NewTextHandler(&glog, &slog.HandlerOptions{Level: slog.LevelWarn}))
	gatewaytest.Start(t, cfg)

	holderIn, holderW := io.Pipe()
	holderDone := make(chan error, 1)
	go func() {
		holderDone <- run(context.Background(), []string{"mcp", "--state-dir", dir, "--name", "lead", "--role", "primary"}, holderIn, io.Discard, io.Discard)
	}()
	t.Cleanup(func() { holderW.Close(); <-holderDone })
	gatewaytest.Eventually(t, 5*time.Second, "lead holds its name", func() bool {
		r, err := gateway.Ask(dir, gateway.Request{Op: "roster"})
		if err != nil {
			return false
		}
		for _, e := range r.Roster.Entities {
			if e.Name == "lead" && e.Sessions > 0 {
				return true
			}
		}
		return false
	})

	client := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{}}`,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bridge_roster","arguments":{}}}`,
		`not json`,
	}, "\n") + "\n"
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"mcp", "--state-dir", dir, "--name", "lead", "--role", "primary"}, strings.NewReader(client), &out, &errb)
	if r := (*reportedError)(nil); err == nil || !errors.As(err, &r) {
		t.Fatalf("second mcp: %v, want the refusal (already reported)", err)
	}
	const why = `name "lead" is in use by a live session`
	if !strings.HasPrefix(errb.String(), "herdbridge mcp cannot start: ") || !strings.Contains(errb.String(), why) {
		t.Errorf("stderr %q", errb.String())
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var resp struct {
			ID    json.RawMessage
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		ids = append(ids, string(resp.ID))
		if resp.Error.Code != mcp.RefusalCode || !strings.Contains(resp.Error.Message, why) || !strings.Contains(resp.Error.Message, "--takeover") {
			t.Errorf("response %s", line)
		}
	}
	if strings.Join(ids, " ") != `"server-discover-probe-1" 0 7` {
		t.Errorf("answered ids %v, want the three requests", ids)
	}
	if l := glog.String(); !strings.Contains(l, "mcp session refused") || !strings.Contains(l, "name=lead") {
		t.Errorf("gateway log:\n%s", l)
	}
}

// TestMCPRefusalNoName: outside herdr with no name the client is told what
// to pass, the same way.
func TestMCPRefusalNoName(t *testing.T) {
	t.Setenv("HERDR_ENV", "")
	t.Setenv("HERDBRIDGE_NAME", "")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"mcp", "--role", "primary", "--state-dir", t.TempDir()},
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n"), &out, &errb)
	if err == nil || !strings.Contains(out.String(), `"id":1`) || !strings.Contains(out.String(), "--name is required outside a herdr pane") ||
		!strings.Contains(errb.String(), "--name is required") {
		t.Errorf("err %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
}
