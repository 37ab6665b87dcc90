// Package gatewaytest starts real gateways in-process for tests — on
// 127.0.0.1:0 with a temp state dir, on the embedded transport or on a
// broker — and connects real MCP clients to them over streamable HTTP,
// SSE and the stdio relay. It is the harness of the gateway's system tests
// and of cmd/herdbridge's; nothing but tests imports it.
package gatewaytest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// LocalConfig is a gateway on the embedded transport in dir (a new temp
// dir if empty), with the short timings the system tests use. herdr is
// disabled: these tests are about the fabric; HerdrConfig wires a fake.
func LocalConfig(t testing.TB, dir string) gateway.Config {
	t.Helper()
	if dir == "" {
		dir = TempDir(t)
	}
	cfg := gateway.Config{StateDir: dir, Listen: "127.0.0.1:0", Host: "testhost", Logger: Logger()}
	cfg.File.Herdr.Disabled = true
	cfg.Core.MaxWait = 8 * time.Second
	cfg.Core.ProgressEvery = 300 * time.Millisecond
	cfg.Core.ReceiptWait = 5 * time.Second
	cfg.Core.NudgeEvery = 200 * time.Millisecond
	cfg.Core.SweepEvery = 100 * time.Millisecond
	return cfg
}

// HerdrConfig is a gateway wired to the fake herdr (nil: a herdr socket
// nobody listens on).
func HerdrConfig(t testing.TB, fake *herdrtest.Server) gateway.Config {
	t.Helper()
	cfg := LocalConfig(t, "")
	cfg.Core.InjectWait = 8 * time.Second
	cfg.File.Herdr.Disabled = false
	cfg.Core.PaneRecheck = 200 * time.Millisecond
	cfg.File.Herdr.NudgeBackoff = gateway.Duration(500 * time.Millisecond)
	if fake != nil {
		cfg.File.Herdr.Socket = fake.SocketPath()
	} else {
		cfg.File.Herdr.Socket = TempDir(t) + "/no-herdr.sock"
	}
	return cfg
}

// TrustReload is how often the gateways of HostConfig reread their trust
// files.
const TrustReload = 100 * time.Millisecond

// HostConfig is the gateway of host on the broker at url, herdr disabled,
// with fast presence and trust reloads. It is not in the trust mesh until
// JoinTrustMesh (StartHost does both).
func HostConfig(t testing.TB, host, url string) gateway.Config {
	t.Helper()
	cfg := gateway.Config{StateDir: TempDir(t), Listen: "127.0.0.1:0", Host: host, Logger: Logger(), Broker: url,
		TrustReload: TrustReload}
	cfg.File.Herdr.Disabled = true
	cfg.Core.MaxWait = 8 * time.Second
	cfg.Core.ReceiptWait = 5 * time.Second
	cfg.Core.SweepEvery = 100 * time.Millisecond
	cfg.Core.PresenceEvery = 300 * time.Millisecond
	return cfg
}

// Start opens a gateway with cfg and runs it until the test ends; it fails
// the test if the gateway does not open, and reports an error Run returns.
func Start(t testing.TB, cfg gateway.Config) *gateway.Gateway {
	t.Helper()
	g, err := gateway.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start gateway %s: %v", cfg.Host, err)
	}
	ran := make(chan error, 1)
	go func() { ran <- g.Run(context.Background()) }()
	t.Cleanup(func() {
		g.Close()
		if err := <-ran; err != nil {
			t.Errorf("gateway %s: run: %v", cfg.Host, err)
		}
	})
	return g
}

// StartLocal runs LocalConfig(t, dir).
func StartLocal(t testing.TB, dir string) *gateway.Gateway {
	t.Helper()
	return Start(t, LocalConfig(t, dir))
}

// StartHost runs host's gateway on the broker at url, in the trust mesh.
func StartHost(t testing.TB, host, url string, tune ...func(*gateway.Config)) *gateway.Gateway {
	t.Helper()
	cfg := HostConfig(t, host, url)
	for _, f := range tune {
		f(&cfg)
	}
	JoinTrustMesh(t, cfg.StateDir, host)
	g := Start(t, cfg)
	MeshStarted(g)
	return g
}

// UniqueHost is a host id no other test run uses at the same time.
func UniqueHost(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}

// Logger logs errors (everything with HB_TEST_LOG set) to stderr.
func Logger() *slog.Logger {
	lvl := slog.LevelError
	if os.Getenv("HB_TEST_LOG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// TempDir is a temp dir short enough to keep unix socket paths under the
// 108-byte limit.
func TempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "hb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Eventually fails the test if ok is not true within the bound.
func Eventually(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Register registers name over g's admin socket and returns its gid and token.
func Register(t testing.TB, g *gateway.Gateway, name, role string, groups ...string) (gid, token string) {
	t.Helper()
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: name, Role: role, Groups: groups})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return r.Entity.GID, r.Token
}

// RegisterOn registers name on g's core (no MCP client).
func RegisterOn(t testing.TB, g *gateway.Gateway, name string, role bridge.Role) bridge.Entity {
	t.Helper()
	e, _, err := g.Core().Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role})
	if err != nil {
		t.Fatalf("register %s on %s: %v", name, g.Host(), err)
	}
	return e
}

// Conn is a real MCP client connection of one entity.
type Conn struct {
	T      testing.TB
	Name   string
	Client *client.Client
	Notes  chan mcpgo.JSONRPCNotification // notifications received (up to 256 kept)
}

// NewConn starts and initializes c; it is closed when the test ends.
func NewConn(t testing.TB, name string, c *client.Client) *Conn {
	t.Helper()
	cn := &Conn{T: t, Name: name, Client: c, Notes: make(chan mcpgo.JSONRPCNotification, 256)}
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		select {
		case cn.Notes <- n:
		default:
		}
	})
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("%s: start: %v", name, err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgo.Implementation{Name: "herdbridge-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("%s: initialize: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return cn
}

// HTTPConn is a streamable HTTP MCP client for a newly registered entity.
func HTTPConn(t testing.TB, g *gateway.Gateway, name, role string, groups ...string) *Conn {
	t.Helper()
	_, tok := Register(t, g, name, role, groups...)
	c, err := client.NewStreamableHttpClient(g.URL()+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	return NewConn(t, name, c)
}

// TokenConn is a streamable HTTP MCP client on url with the given token.
func TokenConn(t testing.TB, url, name, token string, opts ...transport.StreamableHTTPCOption) *Conn {
	t.Helper()
	opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	c, err := client.NewStreamableHttpClient(url+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return NewConn(t, name, c)
}

// SSEConn is an SSE MCP client for a newly registered entity.
func SSEConn(t testing.TB, g *gateway.Gateway, name, role string, groups ...string) *Conn {
	t.Helper()
	_, tok := Register(t, g, name, role, groups...)
	tr, err := transport.NewSSE(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	// The SSE transport predates the 2026-07-28 revision: real SSE clients
	// speak an earlier one (resources/subscribe, logging/setLevel), and
	// mcp-go's SSE server never ends a subscriptions/listen stream.
	return NewConn(t, name, client.NewClient(tr, client.WithLegacyProtocolOnly()))
}

// StdioConn runs `herdbridge mcp` in-process (the same relay the binary
// runs) on pipes and connects an MCP client to its stdio.
func StdioConn(t testing.TB, g *gateway.Gateway, name, role string, groups ...string) *Conn {
	t.Helper()
	return RelayConn(t, g, gateway.Request{Op: "mcp", Name: name, Role: role, Groups: groups})
}

// PaneConn is `herdbridge mcp` started inside a herdr pane (HERDR_PANE_ID).
func PaneConn(t testing.TB, g *gateway.Gateway, name, role, pane string) *Conn {
	t.Helper()
	return RelayConn(t, g, gateway.Request{Op: "mcp", Name: name, Role: role, PaneID: pane})
}

// RelayConn runs the stdio relay with req and connects an MCP client to it.
func RelayConn(t testing.TB, g *gateway.Gateway, req gateway.Request) *Conn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.Relay(ctx, g.StateDir(), req, inR, outW, nil)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
	})
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
	return NewConn(t, req.Name, c)
}

// CallResult is a tool result: the structured content, the text, isError.
type CallResult struct {
	bridge.Result
	IsError bool
	Text    string
}

// CallCtx calls tool.
func (cn *Conn) CallCtx(ctx context.Context, tool string, args map[string]any) (CallResult, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := cn.Client.CallTool(ctx, req)
	if err != nil {
		return CallResult{}, err
	}
	var out CallResult
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

// Call calls tool within 30s, failing the test on a transport error.
func (cn *Conn) Call(tool string, args map[string]any) CallResult {
	cn.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cn.CallCtx(ctx, tool, args)
	if err != nil {
		cn.T.Fatalf("%s: %s: %v", cn.Name, tool, err)
	}
	return r
}

// MustStatus calls tool and fails the test unless it returns status want.
func (cn *Conn) MustStatus(tool string, args map[string]any, want string) CallResult {
	cn.T.Helper()
	r := cn.Call(tool, args)
	if r.IsError || r.Status != want {
		cn.T.Fatalf("%s: %s(%v) = status %q isError=%v text=%q; want %q", cn.Name, tool, args, r.Status, r.IsError, r.Text, want)
	}
	return r
}

// GID is the gid of the connection's entity on g.
func (cn *Conn) GID(t testing.TB, g *gateway.Gateway) string {
	t.Helper()
	e, err := g.Core().Resolve(cn.Name)
	if err != nil {
		t.Fatal(err)
	}
	return e.GID
}

// RosterOK calls bridge_roster, which every connected entity may, and
// fails the test on an error.
func RosterOK(cn *Conn) {
	cn.T.Helper()
	if r := cn.Call("bridge_roster", map[string]any{}); r.IsError {
		cn.T.Fatalf("%s: bridge_roster: %s", cn.Name, r.Text)
	}
}

// AuthPost sends one MCP initialize request to url's /mcp with token (none
// if empty) and returns the HTTP status.
func AuthPost(t testing.TB, hc *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// WaitHeld waits up to 5s until g holds at least n messages for name.
func WaitHeld(t testing.TB, g *gateway.Gateway, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, e := range g.Core().Roster().Entities {
			if e.Name == name && e.Held >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d message(s)", name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CrossHostSend registers a worker on from and a primary on to, waits for
// from to see the primary, sends body and polls it on to. It returns the
// primary.
func CrossHostSend(t testing.TB, from, to *gateway.Gateway, fromName, toName, body string) bridge.Entity {
	t.Helper()
	ctx := context.Background()
	w, _, err := from.Core().Register(ctx, bridge.RegisterRequest{Name: fromName, Role: bridge.RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := to.Core().Register(ctx, bridge.RegisterRequest{Name: toName, Role: bridge.RolePrimary})
	if err != nil {
		t.Fatal(err)
	}
	target := toName + "@" + to.Host()
	Eventually(t, 10*time.Second, from.Host()+" sees "+target, func() bool { _, err := from.Core().Resolve(target); return err == nil })
	if _, err := from.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: body}, nil); err != nil {
		t.Fatalf("send %s -> %s: %v", from.Host(), target, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		r, err := to.Core().Poll(ctx, p.GID, bridge.PollRequest{Max: 10, Wait: 2 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			if m.Body == body {
				return p
			}
		}
	}
	t.Fatalf("%q from %s never reached %s", body, from.Host(), target)
	return bridge.Entity{}
}

// RawStatus is the status and the number of messages of a tool result
// decoded only this far (benchmarks skip the full decoding of Call).
func RawStatus(res *mcpgo.CallToolResult) (string, int) {
	m, _ := res.StructuredContent.(map[string]any)
	msgs, _ := m["messages"].([]any)
	s, _ := m["status"].(string)
	return s, len(msgs)
}
