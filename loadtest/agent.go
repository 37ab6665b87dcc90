package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
)

// Transport is how an agent reaches its gateway.
type Transport string

const (
	// HTTP is streamable HTTP at /mcp with a token from `register`.
	HTTP Transport = "http"
	// Stdio is `herdbridge mcp` as a child process (the stdio relay).
	Stdio Transport = "stdio"
	// Mixed (engine Config only): primaries over HTTP, pull workers
	// alternating HTTP and Stdio.
	Mixed Transport = "mixed"
)

// Result is a tool result as an agent sees it: the structured content, the
// text and isError.
type Result struct {
	bridge.Result
	IsError bool
	Text    string
	// Cursor is a bridge_roster listing's next page ("" on the last);
	// Listed is how many entities a bridge_roster result names, Total how
	// many match (a listing) or are on the fabric (the summary).
	Cursor        string
	Listed, Total int
	// TextBytes and StructuredBytes are the sizes of the result's text
	// content and of its structuredContent as they came: what a client
	// hands its model.
	TextBytes, StructuredBytes int
}

// AgentSpec is one entity and how it connects.
type AgentSpec struct {
	Name      string
	Role      string // primary | worker
	Groups    []string
	Transport Transport
	// PaneID puts a stdio agent in a herdr pane (HERDR_ENV, HERDR_PANE_ID).
	PaneID      string
	HerdrSocket string
}

// Agent is one entity's MCP connection to the gateway on StateDir. It
// reconnects by itself: an HTTP agent registers again (the gateway may be
// back on another port) and re-sends the call that failed — with its
// request_id a repeat publishes nothing —; a stdio agent's relay
// reconnects and re-issues such calls itself.
type Agent struct {
	AgentSpec
	Host     string // the gateway's host id: the agent's address is Name@Host
	stateDir string
	bin      string
	// web is the HTTP agent's own connection pool, as an agent process
	// has: on the shared default one (2 idle connections a host) a
	// hundred agents would open a new connection for most calls.
	web *http.Transport

	mu sync.Mutex
	c  *client.Client
}

// Addr is the agent's address across hosts.
func (a *Agent) Addr() string { return a.Name + "@" + a.Host }

// Connect registers (HTTP) or starts the relay (stdio) and initializes the
// MCP session.
func Connect(ctx context.Context, bin, stateDir, host string, spec AgentSpec) (*Agent, error) {
	a := &Agent{AgentSpec: spec, Host: host, stateDir: stateDir, bin: bin}
	if spec.Transport == HTTP {
		a.web = http.DefaultTransport.(*http.Transport).Clone()
		a.web.MaxIdleConnsPerHost = 8
	}
	c, err := a.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	a.c = c
	return a, nil
}

func (a *Agent) dial(ctx context.Context) (*client.Client, error) {
	var c *client.Client
	switch a.Transport {
	case HTTP:
		r, err := gateway.Ask(a.stateDir, gateway.Request{Op: "register", Name: a.Name, Role: a.Role, Groups: a.Groups})
		if err != nil {
			return nil, err
		}
		if c, err = client.NewStreamableHttpClient(r.URL+"/mcp", transport.WithHTTPBasicClient(&http.Client{Transport: a.web}),
			transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + r.Token})); err != nil {
			return nil, err
		}
	case Stdio:
		args := []string{"mcp", "--state-dir", a.stateDir, "--name", a.Name, "--role", a.Role, "--no-start"}
		for _, g := range a.Groups {
			args = append(args, "--group", g)
		}
		env := []string{"HERDBRIDGE_NAME=", "HERDBRIDGE_ROLE=", "HERDBRIDGE_GROUPS="}
		if a.PaneID != "" {
			env = append(env, "HERDR_ENV=1", "HERDR_PANE_ID="+a.PaneID, "HERDR_SOCKET_PATH="+a.HerdrSocket)
		} else {
			env = append(env, "HERDR_ENV=", "HERDR_PANE_ID=")
		}
		c = client.NewClient(transport.NewStdio(a.bin, env, args...))
	default:
		return nil, fmt.Errorf("unknown transport %q", a.Transport)
	}
	// the relay's child lives as long as the agent, not as this call
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		c.Close()
		return nil, err
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgo.Implementation{Name: "herdbridge-loadtest", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// errClosed: the agent was closed.
var errClosed = errors.New("agent closed")

// Call calls tool. A transport error (the gateway went away) reconnects
// and calls again until ctx ends; a tool error is a Result with IsError.
// Calls of bridge_send, bridge_broadcast and bridge_ask must carry a
// request_id, so that calling again publishes nothing twice.
func (a *Agent) Call(ctx context.Context, tool string, args map[string]any, callTimeout time.Duration) (Result, error) {
	backoff := 50 * time.Millisecond
	for {
		a.mu.Lock()
		c := a.c
		a.mu.Unlock()
		if c == nil {
			return Result{}, errClosed
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		r, err := call(cctx, c, tool, args)
		cancel()
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if a.Transport == HTTP {
			a.redial(ctx, c)
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// redial replaces the HTTP client old (if no other call did already).
func (a *Agent) redial(ctx context.Context, old *client.Client) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.dial(dctx)
	if err != nil {
		return // the gateway is not back yet: the next call tries again
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c != old {
		c.Close()
		return
	}
	a.c = c
	go old.Close()
}

// Close ends the agent's session (and its relay process).
func (a *Agent) Close() {
	a.mu.Lock()
	c := a.c
	a.c = nil
	a.mu.Unlock()
	if c != nil {
		c.Close()
	}
	if a.web != nil {
		a.web.CloseIdleConnections()
	}
}

func call(ctx context.Context, c *client.Client, tool string, args map[string]any) (Result, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return Result{}, err
	}
	out := Result{IsError: res.IsError}
	for _, ct := range res.Content {
		if tc, ok := ct.(mcpgo.TextContent); ok {
			out.Text += tc.Text
		}
	}
	// the bytes as they came, when mcp-go kept them: re-encoding its
	// decoded map first doubled the agent's JSON work on large results
	// (a roster of a thousand entities), and the load tool times it
	raw := []byte(res.RawStructuredContent)
	if len(raw) == 0 && res.StructuredContent != nil {
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			return Result{}, err
		}
	}
	out.TextBytes, out.StructuredBytes = len(out.Text), len(raw)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.Result); err != nil {
			return Result{}, err
		}
		if tool == "bridge_roster" {
			var page struct {
				Cursor   string            `json:"cursor"`
				Total    int               `json:"total"`
				Entities []json.RawMessage `json:"entities"`
			}
			_ = json.Unmarshal(raw, &page) // it decoded above
			out.Cursor, out.Total, out.Listed = page.Cursor, page.Total, len(page.Entities)
		}
	}
	return out, nil
}
