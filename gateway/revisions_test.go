package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/mcp"
)

// modernFirst are clients that try MCP 2026-07-28 first (server/discover,
// no initialize), as mcp-go v1.2.1's client and Claude Code do: streamable
// HTTP, and stdio through `herdbridge mcp`. nudges returns the first two
// nudge notifications the client then gets between calls: over HTTP on
// the standalone GET stream of its session (mcp-go's client opens it only
// when it never probes 2026-07-28, so the test opens it as the TypeScript
// SDK does after initialize).
var modernFirst = []struct {
	name   string
	dial   func(t *testing.T, g *gateway.Gateway) (*gatewaytest.Conn, string)
	nudges func(t *testing.T, g *gateway.Gateway, c *gatewaytest.Conn, tok string) func() []string
}{
	{"http", func(t *testing.T, g *gateway.Gateway) (*gatewaytest.Conn, string) {
		_, tok := gatewaytest.Register(t, g, "lead", "primary")
		return gatewaytest.TokenConn(t, g.URL(), "lead", tok), tok
	}, getStream},
	{"stdio", func(t *testing.T, g *gateway.Gateway) (*gatewaytest.Conn, string) {
		return gatewaytest.StdioConn(t, g, "lead", "primary"), ""
	}, func(t *testing.T, _ *gateway.Gateway, c *gatewaytest.Conn, _ string) func() []string {
		return func() []string { return awaitNotes(t, c, isMethod("notifications/resources/updated")) }
	}},
}

// TestModernClientNegotiatesDown: a client that asks for 2026-07-28 first is
// told the revisions herdbridge serves and negotiates down to 2025-11-25
// with initialize; then everything keyed on its session works: send, poll,
// the nudge (log message and inbox update), progress.
func TestModernClientNegotiatesDown(t *testing.T) {
	for _, tr := range modernFirst {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.StartLocal(t, "")
			p, tok := tr.dial(t, g)
			if v := p.Client.ProtocolVersion(); v != mcpgo.ProtocolVersion20251125 {
				t.Fatalf("negotiated %q, want %s (herdbridge serves %v)", v, mcpgo.ProtocolVersion20251125, mcp.Revisions)
			}
			w := gatewaytest.StdioConn(t, g, "w", "worker")
			nudges := tr.nudges(t, g, p, tok)
			subscribeInbox(t, p)
			w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "done"}, "confirmed")
			if got := strings.Join(nudges(), ","); got != "message,updated" {
				t.Fatalf("nudges %s, want message,updated", got)
			}
			if r := p.MustStatus("bridge_poll", map[string]any{"target": "w"}, "drained"); r.Messages[0].Body != "done" {
				t.Fatalf("drained %+v", r.Messages)
			}
			if n := progressNotes(t, p); n < 2 {
				t.Fatalf("%d progress notifications over a 2 s poll at 300 ms, want several", n)
			}
		})
	}
}

// getStream opens the standalone GET stream of c's streamable HTTP session
// and returns what reads its first two nudges.
func getStream(t *testing.T, g *gateway.Gateway, c *gatewaytest.Conn, tok string) func() []string {
	t.Helper()
	sid := c.Client.GetTransport().(*transport.StreamableHTTP).GetSessionId()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL()+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", c.Client.ProtocolVersion())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream of session %s: %v %v", sid, resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	methods := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var n struct{ Method string }
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &n) == nil {
				switch n.Method {
				case "notifications/message":
					methods <- "message"
				case "notifications/resources/updated":
					methods <- "updated"
				}
			}
		}
	}()
	return func() []string {
		var got []string
		for len(got) < 2 {
			select {
			case m := <-methods:
				got = append(got, m)
			case <-time.After(10 * time.Second):
				return got
			}
		}
		return got
	}
}

// progressNotes long-polls 2 s with a progress token and counts the
// progress notifications that came meanwhile.
func progressNotes(t *testing.T, p *gatewaytest.Conn) int {
	t.Helper()
	for len(p.Notes) > 0 {
		<-p.Notes
	}
	req := mcpgo.CallToolRequest{}
	req.Params.Name = "bridge_poll"
	req.Params.Arguments = map[string]any{"wait_s": 2}
	req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok-1"}
	if _, err := p.Client.CallTool(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	n := 0
	for len(p.Notes) > 0 {
		if note := <-p.Notes; note.Method == "notifications/progress" {
			n++
		}
	}
	return n
}

// TestRevision20260728Refused: a 2026-07-28 request over streamable HTTP
// is answered 400 with UnsupportedProtocolVersion and the revisions served,
// the answer a client negotiates down from.
func TestRevision20260728Refused(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	body := `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	req, _ := http.NewRequest("POST", g.URL()+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != http.StatusBadRequest || !slices.Equal(m.Error.Data.Supported, mcp.Revisions) {
		t.Fatalf("2026-07-28 server/discover: %d %s, want 400 with supported %v", resp.StatusCode, raw, mcp.Revisions)
	}
}

// TestRevision20260728RefusedOverSSE: the SSE transport refuses a
// 2026-07-28 request too (a request hook: mcp-go's SSE server would serve
// it), answering on the session's stream with an error naming the
// revisions served.
func TestRevision20260728RefusedOverSSE(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL()+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	endpoint := ""
	for endpoint == "" && lines.Scan() {
		if e, ok := strings.CutPrefix(lines.Text(), "data: "); ok && strings.Contains(e, "sessionId=") {
			endpoint = e
		}
	}
	if !strings.HasPrefix(endpoint, "http") {
		endpoint = g.URL() + endpoint
	}
	body := `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	post, _ := http.NewRequestWithContext(ctx, "POST", endpoint, strings.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+tok)
	post.Header.Set("Content-Type", "application/json")
	pr, err := http.DefaultClient.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	pr.Body.Close()
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok || !strings.Contains(data, `"id":9`) {
			continue
		}
		var m struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(data), &m) != nil || !strings.Contains(m.Error.Message, "not served") || !strings.Contains(m.Error.Message, "2025-11-25") {
			t.Fatalf("2026-07-28 over SSE answered %s, want an error naming the revisions served", data)
		}
		return
	}
	t.Fatal("no answer to the 2026-07-28 request on the SSE stream")
}
