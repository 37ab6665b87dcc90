// Package demo is `herdbridge demo`: a full exchange — brief and reply,
// a filtered poll, an ask answered, NO_WAITER, TOO_LATE, a broadcast —
// between three real MCP clients (streamable HTTP, stdio through the
// relay `herdbridge mcp` runs, SSE) against a live gateway, printed as a
// transcript.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
)

// demoClient is one real MCP client connection used by the demo.
type demoClient struct {
	name, via string
	c         *client.Client
}

func (d *demoClient) call(ctx context.Context, tool string, args map[string]any) (bridge.Result, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := d.c.CallTool(ctx, req)
	if err != nil {
		return bridge.Result{}, fmt.Errorf("%s: %s: %w", d.name, tool, err)
	}
	var r bridge.Result
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &r)
	if res.IsError {
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(mcpgo.TextContent); ok {
				text += tc.Text
			}
		}
		return r, fmt.Errorf("%s: %s: %s", d.name, tool, text)
	}
	return r, nil
}

func startDemoClient(ctx context.Context, c *client.Client, name, via string) (*demoClient, error) {
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("%s over %s: %w", name, via, err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgo.Implementation{Name: "herdbridge-demo", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, fmt.Errorf("%s over %s: initialize: %w", name, via, err)
	}
	return &demoClient{name: name, via: via, c: c}, nil
}

// Run runs a full exchange against a live gateway — the one on dir if it
// runs, else one started in-process on a temp dir — with real MCP client
// connections over streamable HTTP, stdio and SSE, and prints the
// transcript; it fails at the first step with an unexpected status.
func Run(ctx context.Context, dir string, stdout io.Writer) (err error) {
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	stateDir := dir
	if c, derr := net.DialTimeout("unix", filepath.Join(stateDir, gateway.SocketName), time.Second); derr == nil {
		c.Close()
		say("using the gateway on %s", stateDir)
	} else {
		tmp, terr := os.MkdirTemp("", "hbdemo")
		if terr != nil {
			return terr
		}
		defer os.RemoveAll(tmp)
		g, err := gateway.Open(ctx, gateway.Config{StateDir: tmp, Listen: "127.0.0.1:0", Host: gateway.DefaultHost()})
		if err != nil {
			return err
		}
		ran := make(chan error, 1)
		go func() { ran <- g.Run(ctx) }()
		defer func() { g.Close(); <-ran }()
		stateDir = tmp
		say("no gateway on %s: started one in-process at %s (state %s)", dir, g.URL(), tmp)
	}
	suffix := make([]byte, 2)
	_, _ = rand.Read(suffix)
	tag := hex.EncodeToString(suffix)
	lead, worker, peer := "demo-lead-"+tag, "demo-worker-"+tag, "demo-peer-"+tag
	registerTok := func(name, role string, groups ...string) (string, string, error) {
		r, err := gateway.Ask(stateDir, gateway.Request{Op: "register", Name: name, Role: role, Groups: groups})
		return r.Token, r.URL, err
	}
	defer func() {
		for _, n := range []string{lead, worker, peer} {
			_, _ = gateway.Ask(stateDir, gateway.Request{Op: "remove", Name: n})
		}
	}()

	// the primary over streamable HTTP
	tok, url, err := registerTok(lead, "primary")
	if err != nil {
		return err
	}
	hc, err := client.NewStreamableHttpClient(url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		return err
	}
	p, err := startDemoClient(ctx, hc, lead, "streamable HTTP")
	if err != nil {
		return err
	}
	defer hc.Close()
	// the worker over stdio, through the same relay `herdbridge mcp` runs
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	rctx, rcancel := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = gateway.Relay(rctx, stateDir, gateway.Request{Op: "mcp", Name: worker, Role: "worker", Groups: []string{"build"}}, inR, outW, nil)
		outW.Close()
	}()
	defer func() { inW.Close(); rcancel(); <-relayDone }()
	w, err := startDemoClient(ctx, client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader("")))), worker, "stdio")
	if err != nil {
		return err
	}
	// a peer worker over SSE
	tok, url, err = registerTok(peer, "worker", "review")
	if err != nil {
		return err
	}
	sc, err := client.NewSSEMCPClient(url+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		return err
	}
	o, err := startDemoClient(ctx, sc, peer, "SSE")
	if err != nil {
		return err
	}
	defer sc.Close()
	say("connected: %s (primary, %s), %s (worker, %s), %s (worker, %s)\n", p.name, p.via, w.name, w.via, o.name, o.via)

	show := func(who *demoClient, tool string, args map[string]any, r bridge.Result) {
		a, _ := json.Marshal(args)
		line := fmt.Sprintf("%-22s %s %s → %s", who.name, tool, a, r.Status)
		for _, m := range r.Messages {
			line += fmt.Sprintf("\n%24s %s from %s: %q", "", m.Kind, m.FromName, m.Body)
		}
		if r.TurnID != "" {
			line += "  turn_id=" + r.TurnID[:8] + "…"
		}
		if r.Reason != "" {
			line += "  (" + r.Reason + ")"
		}
		say("%s", line)
	}
	do := func(who *demoClient, tool string, args map[string]any) (bridge.Result, error) {
		r, err := who.call(ctx, tool, args)
		if err == nil {
			show(who, tool, args, r)
		}
		return r, err
	}
	type async struct {
		r   bridge.Result
		err error
	}
	start := func(who *demoClient, tool string, args map[string]any) chan async {
		ch := make(chan async, 1)
		go func() { r, err := who.call(ctx, tool, args); ch <- async{r, err} }()
		return ch
	}
	finish := func(who *demoClient, tool string, args map[string]any, ch chan async, want string) (bridge.Result, error) {
		a := <-ch
		if a.err != nil {
			return a.r, a.err
		}
		show(who, tool, args, a.r)
		if a.r.Status != want {
			return a.r, fmt.Errorf("%s: %s returned %s, expected %s", who.name, tool, a.r.Status, want)
		}
		return a.r, nil
	}
	step := func(who *demoClient, tool string, args map[string]any, want string) error {
		r, err := do(who, tool, args)
		if err != nil {
			return err
		}
		if r.Status != want {
			return fmt.Errorf("%s: %s returned %s, expected %s", who.name, tool, r.Status, want)
		}
		return nil
	}
	pollUntil := func(who *demoClient, args map[string]any) (bridge.Result, error) {
		for i := 0; i < 10; i++ {
			r, err := who.call(ctx, "bridge_poll", args)
			if err != nil || r.Status == bridge.StatusDrained {
				if err == nil {
					show(who, "bridge_poll", args, r)
				}
				return r, err
			}
		}
		return bridge.Result{}, errors.New(who.name + ": nothing arrived")
	}

	say("\n1. brief, and a reply that resolves the open send")
	sendArgs := map[string]any{"target": worker, "message": "Run the tests and report.", "wait_s": 30}
	ch := start(p, "bridge_send", sendArgs)
	if _, err := pollUntil(w, map[string]any{"wait_s": 10}); err != nil {
		return err
	}
	if err := step(w, "bridge_send", map[string]any{"target": lead, "message": "All 42 tests pass."}, bridge.StatusConfirmed); err != nil {
		return err
	}
	if _, err := finish(p, "bridge_send", sendArgs, ch, bridge.StatusReplied); err != nil {
		return err
	}

	say("\n2. poll filtered by from: only the peer's message is drained")
	if err := step(w, "bridge_send", map[string]any{"target": lead, "message": "worker note"}, bridge.StatusConfirmed); err != nil {
		return err
	}
	if err := step(o, "bridge_send", map[string]any{"target": lead, "message": "review done"}, bridge.StatusConfirmed); err != nil {
		return err
	}
	if err := step(p, "bridge_poll", map[string]any{"target": peer, "wait_s": 5}, bridge.StatusDrained); err != nil {
		return err
	}
	if err := step(p, "bridge_poll", map[string]any{"target": worker}, bridge.StatusDrained); err != nil {
		return err
	}

	say("\n3. ask answered while the primary's send is open")
	sendArgs = map[string]any{"target": worker, "message": "Now fix the flaky one.", "wait_s": 30}
	ch = start(p, "bridge_send", sendArgs)
	if _, err := pollUntil(w, map[string]any{"wait_s": 10}); err != nil {
		return err
	}
	askArgs := map[string]any{"question": "Skip it or fix it?"}
	ach := start(w, "bridge_ask", askArgs)
	asked, err := finish(p, "bridge_send", sendArgs, ch, bridge.StatusAsked)
	if err != nil {
		return err
	}
	if err := step(p, "bridge_send", map[string]any{"target": worker, "message": "Fix it.", "turn_id": asked.TurnID}, bridge.StatusDelivered); err != nil {
		return err
	}
	if _, err := finish(w, "bridge_ask", askArgs, ach, bridge.StatusAnswered); err != nil {
		return err
	}

	say("\n4. ask with nobody waiting → NO_WAITER at once")
	if err := step(w, "bridge_ask", map[string]any{"question": "Anyone there?"}, bridge.StatusNoWaiter); err != nil {
		return err
	}

	say("\n5. late answer → TOO_LATE")
	sendArgs = map[string]any{"target": worker, "message": "Last task.", "wait_s": 30}
	ch = start(p, "bridge_send", sendArgs)
	if _, err := pollUntil(w, map[string]any{"wait_s": 10}); err != nil {
		return err
	}
	askArgs = map[string]any{"question": "Quick: yes or no?", "timeout_s": 1}
	ach = start(w, "bridge_ask", askArgs)
	asked, err = finish(p, "bridge_send", sendArgs, ch, bridge.StatusAsked)
	if err != nil {
		return err
	}
	if _, err := finish(w, "bridge_ask", askArgs, ach, bridge.StatusExpired); err != nil {
		return err
	}
	if err := step(p, "bridge_send", map[string]any{"target": worker, "message": "Yes.", "turn_id": asked.TurnID}, bridge.StatusTooLate); err != nil {
		return err
	}

	say("\n6. broadcast: one publish, every other inbox gets a copy")
	if err := step(p, "bridge_broadcast", map[string]any{"message": "Freeze merges at 17:00."}, bridge.StatusConfirmed); err != nil {
		return err
	}
	if _, err := pollUntil(w, map[string]any{"wait_s": 5}); err != nil {
		return err
	}
	if _, err := pollUntil(o, map[string]any{"wait_s": 5}); err != nil {
		return err
	}
	say("\ndemo complete: every step returned the expected status")
	return nil
}
