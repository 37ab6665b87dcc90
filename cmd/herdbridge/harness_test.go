package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// startGateway runs a whole gateway in-process on 127.0.0.1:0 with a temp
// state dir.
func startGateway(t testing.TB, dir string) *Gateway {
	t.Helper()
	if dir == "" {
		dir = shortTempDir(t)
	}
	g := &Gateway{StateDir: dir, Listen: "127.0.0.1:0", Host: "testhost", Logger: testLogger()}
	g.Config.Herdr.Disabled = true // these tests are about the fabric; herdr_test.go wires a fake herdr
	g.Core.MaxWait = 8 * time.Second
	g.Core.ProgressEvery = 300 * time.Millisecond
	g.Core.ReceiptWait = 5 * time.Second
	g.Core.NudgeEvery = 200 * time.Millisecond
	g.Core.SweepEvery = 100 * time.Millisecond
	if err := g.Start(context.Background()); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// testLogger logs warnings (everything with HB_TEST_LOG set) to stderr.
func testLogger() *slog.Logger {
	lvl := slog.LevelError
	if os.Getenv("HB_TEST_LOG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// shortTempDir keeps unix socket paths under the 108-byte limit.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "hb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func register(t testing.TB, g *Gateway, name, role string, groups ...string) (gid, token string) {
	t.Helper()
	c, _, r, err := dialGateway(g.StateDir, sockRequest{Op: "register", Name: name, Role: role, Groups: groups})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	c.Close()
	return r.Entity.GID, r.Token
}

type conn struct {
	t     testing.TB
	name  string
	c     *client.Client
	notes chan mcpgo.JSONRPCNotification
}

func (cn *conn) init(ctx context.Context) {
	cn.t.Helper()
	cn.notes = make(chan mcpgo.JSONRPCNotification, 256)
	cn.c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		select {
		case cn.notes <- n:
		default:
		}
	})
	if err := cn.c.Start(ctx); err != nil {
		cn.t.Fatalf("%s: start: %v", cn.name, err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgo.Implementation{Name: "herdbridge-test", Version: "1"}
	if _, err := cn.c.Initialize(ctx, req); err != nil {
		cn.t.Fatalf("%s: initialize: %v", cn.name, err)
	}
	cn.t.Cleanup(func() { cn.c.Close() })
}

// httpConn is a streamable HTTP MCP client for a registered entity.
func httpConn(t testing.TB, g *Gateway, name, role string, groups ...string) *conn {
	t.Helper()
	_, tok := register(t, g, name, role, groups...)
	c, err := client.NewStreamableHttpClient(g.URL()+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	cn := &conn{t: t, name: name, c: c}
	cn.init(context.Background())
	return cn
}

// sseConn is an SSE MCP client for a registered entity.
func sseConn(t testing.TB, g *Gateway, name, role string, groups ...string) *conn {
	t.Helper()
	_, tok := register(t, g, name, role, groups...)
	c, err := client.NewSSEMCPClient(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	cn := &conn{t: t, name: name, c: c}
	cn.init(context.Background())
	return cn
}

// stdioConn runs `herdbridge mcp` in-process (the same relay the binary
// runs) on pipes and connects an MCP client to its stdio.
func stdioConn(t testing.TB, g *Gateway, name, role string, groups ...string) *conn {
	t.Helper()
	return relayConn(t, g, sockRequest{Op: "mcp", Name: name, Role: role, Groups: groups})
}

func relayConn(t testing.TB, g *Gateway, req sockRequest) *conn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- relay(ctx, g.StateDir, req, inR, outW, nil)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
	})
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
	cn := &conn{t: t, name: req.Name, c: c}
	cn.init(context.Background())
	return cn
}

type callResult struct {
	bridge.Result
	IsError bool
	Text    string
}

func (cn *conn) callCtx(ctx context.Context, tool string, args map[string]any) (callResult, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := cn.c.CallTool(ctx, req)
	if err != nil {
		return callResult{}, err
	}
	var out callResult
	out.IsError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			out.Text += tc.Text
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &out.Result)
	}
	return out, nil
}

func (cn *conn) call(tool string, args map[string]any) callResult {
	cn.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cn.callCtx(ctx, tool, args)
	if err != nil {
		cn.t.Fatalf("%s: %s: %v", cn.name, tool, err)
	}
	return r
}

func (cn *conn) mustStatus(tool string, args map[string]any, want string) callResult {
	cn.t.Helper()
	r := cn.call(tool, args)
	if r.IsError || r.Status != want {
		cn.t.Fatalf("%s: %s(%v) = status %q isError=%v text=%q; want %q", cn.name, tool, args, r.Status, r.IsError, r.Text, want)
	}
	return r
}
