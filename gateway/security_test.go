package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:7077"} {
		g, err := gateway.Open(context.Background(), gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: addr, Host: "h"})
		if err == nil {
			g.Close()
			t.Fatalf("%s: started", addr)
		}
		if !strings.Contains(err.Error(), "only loopback") {
			t.Fatalf("%s: %v", addr, err)
		}
	}
}

func TestSocketIsPrivate(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	fi, err := os.Stat(g.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestRelayMintsNoTokens: stdio relays re-attach many times without pushing
// the user's HTTP token out of the last-32 window.
func TestRelayMintsNoTokens(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	for i := 0; i < 40; i++ {
		c, _, r, err := gateway.Dial(g.StateDir(), gateway.Request{Op: "mcp", Name: "lead", Role: "primary"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Token != "" {
			t.Fatal("mcp op returned a token")
		}
		c.Close()
	}
	if _, ok := g.Core().Authenticate(tok); !ok {
		t.Fatal("the registered token stopped working after 40 relay connects")
	}
}

func TestSocketRefusesHugeRequestLine(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	c, err := net.Dial("unix", g.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write([]byte(strings.Repeat("x", 200<<10) + "\n")) }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "over 64 KiB") {
		t.Fatalf("reply %q", line)
	}
}

// TestSessionBelongsToItsEntity: another entity's token cannot use a session.
func TestSessionBelongsToItsEntity(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	a := gatewaytest.HTTPConn(t, g, "a", "primary")
	_, tokB := gatewaytest.Register(t, g, "b", "primary")
	sid := a.Client.GetSessionId()
	if sid == "" {
		t.Fatal("no session id")
	}
	req, _ := http.NewRequest("POST", g.URL()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"bridge_poll","arguments":{}}}`))
	req.Header.Set("Authorization", "Bearer "+tokB)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body["error"] != "forbidden_session" {
		t.Fatalf("403 body %v (%v), want a JSON error saying the session is another entity's", body, err)
	}
}

// TestInboxResource: bridge://inbox peeks without consuming.
func TestInboxResource(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.StdioConn(t, g, "w", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "peek me"}, "confirmed")
	req := mcpgo.ReadResourceRequest{}
	req.Params.URI = "bridge://inbox"
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := p.Client.ReadResource(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		text := res.Contents[0].(mcpgo.TextResourceContents).Text
		if strings.Contains(text, "peek me") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inbox resource: %s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := p.MustStatus("bridge_poll", map[string]any{}, "drained")
	if r.Messages[0].Body != "peek me" {
		t.Fatalf("%+v", r.Messages)
	}
}

// TestSSEDisconnectAbandons: mcp-go's SSE transport does not cancel a
// handler when its client goes; the unregister hook does, so a worker's
// open ask becomes ABANDONED for the primary.
func TestSSEDisconnectAbandons(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	_, tok := gatewaytest.Register(t, g, "w", "worker")
	sc, err := client.NewSSEMCPClient(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	w := gatewaytest.NewConn(t, "w", sc)
	done := make(chan gatewaytest.CallResult, 1)
	go func() {
		done <- p.Call("bridge_send", map[string]any{"target": "w", "message": "task", "wait_s": 6})
	}()
	waitPoll(t, w, "task")
	go func() { _, _ = w.CallCtx(context.Background(), "bridge_ask", map[string]any{"question": "q?"}) }()
	sent := <-done
	if sent.Status != "asked" {
		t.Fatalf("send: %+v", sent.Result)
	}
	sc.Close() // the worker's client goes away mid-ask
	// the server notices the SSE stream end on its own time: answering
	// before it did would (rightly) deliver the answer to the open ask
	gatewaytest.Eventually(t, 5*time.Second, "the worker's session ended", func() bool {
		for _, e := range g.Core().Roster().Entities {
			if e.Name == "w" {
				return e.Sessions == 0
			}
		}
		return false
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := p.Call("bridge_send", map[string]any{"target": "w", "message": "a", "turn_id": sent.TurnID})
		if r.Status == "abandoned" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("answer after SSE disconnect: %+v (%s)", r.Result, r.Text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
