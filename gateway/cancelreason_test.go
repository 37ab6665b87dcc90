package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestClientCancelSaysClientCancelled: a call the client cancels (Codex
// does at its tool timeout) ends with a result that says so — not
// "gateway restarting or session closed", which sent the reader looking
// for a restart that never happened. The session is a raw stream session
// (ServeConn with no relay in front), which writes the cancelled call's
// result, so the test reads the very text a client would.
func TestClientCancelSaysClientCancelled(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	gid, _ := gatewaytest.Register(t, g, "lead", "primary")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.MCPServer().ServeConn(ctx, gid, inR, outW) }()
	t.Cleanup(func() { stop(); inW.Close(); outR.Close(); <-served })
	lines := make(chan map[string]json.RawMessage, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	send := func(m map[string]any) {
		m["jsonrpc"] = "2.0"
		raw, _ := json.Marshal(m)
		if _, err := inW.Write(append(raw, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	await := func(id string) map[string]json.RawMessage {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("the session ended before answering %s", id)
				}
				if string(m["id"]) == id {
					return m
				}
			case <-timeout:
				t.Fatalf("no answer to %s", id)
			}
		}
	}
	send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": rawProtocol,
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "canceltest", "version": "1"}}})
	await("1")
	send(map[string]any{"method": "notifications/initialized"})
	send(map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "bridge_poll", "arguments": map[string]any{"wait_s": 30}}})
	gatewaytest.Eventually(t, 10*time.Second, "the poll waiting", func() bool { _, waiting := g.Core().Held(gid); return waiting })
	send(map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 2, "reason": "timed out"}})
	res := await("2")
	text := string(res["result"])
	if !strings.Contains(text, "the client cancelled the call") || strings.Contains(text, "restarting") {
		t.Fatalf("a client's cancel must be named as such: %s", text)
	}
}
