package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	bstore "github.com/herdbridge/herdbridge/bridge/store"
)

// testServer is an MCP server on a real core (embedded transport and
// state file in a temp dir) whose waits are capped at maxWait.
func testServer(t *testing.T, maxWait time.Duration) (*Server, *bridge.Core) {
	t.Helper()
	dir := t.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := bstore.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bridge.New(bridge.Config{Host: "h1", Transport: tr, Store: st, MaxWait: maxWait,
		SweepEvery: 50 * time.Millisecond, ReceiptWait: time.Second, ProgressEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); st.Close(); tr.Close() })
	return New(c, nil), c
}

// entity registers name and returns a context that calls as it.
func entity(t *testing.T, c *bridge.Core, name string, role bridge.Role) context.Context {
	t.Helper()
	e, _, err := c.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return WithEntity(context.Background(), e.GID)
}

// callTool runs tool's handler with args, as the MCP server would.
func callTool(t *testing.T, s *Server, ctx context.Context, tool string, args map[string]any) *mcpgo.CallToolResult {
	t.Helper()
	r, err := handle(s, ctx, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

// handle is callTool for a goroutine: the error is returned.
func handle(s *Server, ctx context.Context, tool string, args map[string]any) (*mcpgo.CallToolResult, error) {
	for _, td := range s.tools() {
		if td.Tool.Name == tool {
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = tool, args
			return td.Handler(ctx, req)
		}
	}
	return nil, fmt.Errorf("no tool %s", tool)
}

// says checks what the model sees of r, whichever half its client shows:
// structuredContent has a next (and a reason when r is an error), and the
// text says the same next and reason. It returns the structured content.
func says(t *testing.T, what string, r *mcpgo.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.StructuredContent)
	if err != nil || r.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent (%v): Claude Code and Codex would show the model nothing", what, err)
	}
	var sc map[string]any
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, c := range r.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			text += tc.Text
		}
	}
	next, _ := sc["next"].(string)
	if next == "" {
		t.Errorf("%s: structuredContent has no next: %s", what, raw)
	}
	if !strings.Contains(text, "next: "+next) {
		t.Errorf("%s: the text does not say the same next %q:\n%s", what, next, text)
	}
	reason, _ := sc["reason"].(string)
	if r.IsError {
		if reason == "" {
			t.Errorf("%s: an error whose structuredContent has no reason: %s", what, raw)
		}
		if _, roster := sc["hosts"]; !roster && sc["status"] != StatusError {
			t.Errorf("%s: an error with status %v, want %q", what, sc["status"], StatusError)
		}
	}
	if reason != "" && !strings.Contains(text, reason) {
		t.Errorf("%s: the text does not say the reason %q:\n%s", what, reason, text)
	}
	return sc
}

func wantResult(t *testing.T, what string, sc map[string]any, status, nextHas string) {
	t.Helper()
	if sc["status"] != status {
		t.Errorf("%s: status %v, want %s (%v)", what, sc["status"], status, sc)
	}
	if next, _ := sc["next"].(string); !strings.Contains(next, nextHas) {
		t.Errorf("%s: next %q, want it to say %q", what, next, nextHas)
	}
}

// TestEveryResultSaysNext: for each tool, results and refusals alike,
// structuredContent carries next (and reason when something went wrong),
// and the text says the same: the model sees it whether its client shows
// structuredContent (Claude Code, Codex) or the text (Gemini CLI, pi).
func TestEveryResultSaysNext(t *testing.T) {
	s, c := testServer(t, 300*time.Millisecond)
	lead := entity(t, c, "lead", bridge.RolePrimary)
	w1 := entity(t, c, "w1", bridge.RoleWorker)

	says(t, "roster", callTool(t, s, lead, "bridge_roster", nil))
	sc := says(t, "brief to a pull worker", callTool(t, s, lead, "bridge_send", map[string]any{"target": "w1", "message": "do it"}))
	wantResult(t, "brief", sc, bridge.StatusConfirmed, "bridge_poll(target=w1")
	sc = says(t, "worker drains its brief", callTool(t, s, w1, "bridge_poll", nil))
	wantResult(t, "worker drains", sc, bridge.StatusDrained, "bridge_poll(wait_s=0.3)")
	sc = says(t, "empty poll", callTool(t, s, w1, "bridge_poll", nil))
	wantResult(t, "empty poll", sc, bridge.StatusEmpty, "bridge_poll(wait_s=0.3)")
	sc = says(t, "open send runs out", callTool(t, s, lead, "bridge_send", map[string]any{"target": "w1", "message": "more", "wait_s": 5}))
	wantResult(t, "open send runs out", sc, bridge.StatusPending, "bridge_poll(target=w1, wait_s=0.3)")
	sc = says(t, "long poll runs out", callTool(t, s, lead, "bridge_poll", map[string]any{"target": "w1", "wait_s": 5}))
	wantResult(t, "long poll runs out", sc, bridge.StatusPending, "bridge_poll(target=w1, wait_s=0.3)")
	says(t, "reply", callTool(t, s, w1, "bridge_send", map[string]any{"target": "lead", "message": "done"}))
	says(t, "ask nobody waits for", callTool(t, s, w1, "bridge_ask", map[string]any{"question": "which?", "target": "lead"}))
	says(t, "broadcast", callTool(t, s, lead, "bridge_broadcast", map[string]any{"message": "hello"}))
	says(t, "peek", callTool(t, s, lead, "bridge_poll", map[string]any{"peek": true}))
	says(t, "history off", callTool(t, s, lead, "bridge_history", nil))
	says(t, "interrupt of a worker with no pane", callTool(t, s, lead, "bridge_interrupt", map[string]any{"target": "w1"}))
	says(t, "spawn of no profile", callTool(t, s, lead, "bridge_spawn", map[string]any{"profile": "nope"}))
	sc = says(t, "unknown target", callTool(t, s, lead, "bridge_send", map[string]any{"target": "w9", "message": "x"}))
	wantResult(t, "unknown target", sc, StatusError, "bridge_send again")
	says(t, "bad argument", callTool(t, s, lead, "bridge_poll", map[string]any{"wait_s": "soon"}))
	says(t, "bad roster argument", callTool(t, s, lead, "bridge_roster", map[string]any{"from": "x"}))
	says(t, "stop", callTool(t, s, lead, "bridge_stop", map[string]any{"target": "w1"}))
	says(t, "no entity", callTool(t, s, context.Background(), "bridge_poll", nil))
	says(t, "roster without an entity", callTool(t, s, context.Background(), "bridge_roster", nil))
}

// TestAskDuringPollIsAsked: an ASK that reaches a primary's open
// bridge_poll returns asked (README "Semantics"), with its turn_id and a
// next that says to answer it with bridge_send(turn_id).
func TestAskDuringPollIsAsked(t *testing.T) {
	s, c := testServer(t, 5*time.Second)
	lead := entity(t, c, "lead", bridge.RolePrimary)
	w1 := entity(t, c, "w1", bridge.RoleWorker)
	polled := make(chan *mcpgo.CallToolResult, 1)
	go func() {
		r, _ := handle(s, lead, "bridge_poll", map[string]any{"wait_s": 5})
		polled <- r
	}()
	for !waiting(c, "lead") {
		time.Sleep(10 * time.Millisecond)
	}
	go handle(s, w1, "bridge_ask", map[string]any{"question": "which branch?", "target": "lead", "timeout_s": 1})
	sc := says(t, "poll that took an ask", <-polled)
	wantResult(t, "poll that took an ask", sc, bridge.StatusAsked, "bridge_send(turn_id="+sc["turnId"].(string))
}

// TestDescriptionsStateTheConfiguredCap: the tools say the cap the gateway
// runs with (--max-wait), not a constant 45.
func TestDescriptionsStateTheConfiguredCap(t *testing.T) {
	s, _ := testServer(t, 120*time.Second)
	for _, td := range s.tools() {
		raw, _ := json.Marshal(td.Tool)
		if strings.Contains(string(raw), "45") || strings.Contains(string(raw), "{cap}") {
			t.Errorf("%s says 45 or {cap} with --max-wait 120s: %s", td.Tool.Name, raw)
		}
		switch td.Tool.Name {
		case "bridge_send", "bridge_ask", "bridge_poll":
			if !strings.Contains(td.Tool.Description, "120 s") {
				t.Errorf("%s: description does not state the 120 s cap: %s", td.Tool.Name, td.Tool.Description)
			}
		}
	}
}

func waiting(c *bridge.Core, name string) bool {
	for _, e := range c.Roster().Entities {
		if e.Name == name {
			return e.Waiting
		}
	}
	return false
}

// TestCutCallSaysWhy: a call whose context ends before its body says why
// — its client cancelled it (Codex does at 300 s), its session closed,
// the gateway is stopping — never blaming a restart that did not happen.
func TestCutCallSaysWhy(t *testing.T) {
	s, c := testServer(t, 5*time.Second)
	lead := entity(t, c, "lead", bridge.RolePrimary)
	cut := func(what string, ctx context.Context, end func()) string {
		t.Helper()
		got := make(chan *mcpgo.CallToolResult, 1)
		go func() {
			r, _ := handle(s, ctx, "bridge_poll", map[string]any{"wait_s": 5})
			got <- r
		}()
		for !waiting(c, "lead") {
			time.Sleep(10 * time.Millisecond)
		}
		end()
		r := <-got
		if r == nil || !r.IsError {
			t.Fatalf("%s: %+v, want a tool error", what, r)
		}
		sc := says(t, what, r)
		return sc["reason"].(string)
	}

	ctx, cancel := context.WithCancel(lead)
	if why := cut("client cancel", ctx, cancel); !strings.Contains(why, "client cancelled") || strings.Contains(why, "restart") {
		t.Errorf("a call its client cancelled says %q", why)
	}

	sess := &connSession{id: "sock-t", notes: make(chan mcpgo.JSONRPCNotification, 8)}
	s.track(sess, mustGID(t, lead))
	if why := cut("session closed", s.mcp.WithContext(lead, sess), func() { s.untrack(sess.id) }); !strings.Contains(why, "session closed") {
		t.Errorf("a call whose session closed says %q", why)
	}

	ctx, cancel = context.WithCancel(lead)
	if why := cut("gateway stop", ctx, func() { c.Stopping(); cancel() }); !strings.Contains(why, "gateway is stopping") {
		t.Errorf("a call cut by the gateway's stop says %q", why)
	}
}

func mustGID(t *testing.T, ctx context.Context) string {
	t.Helper()
	gid, ok := EntityFrom(ctx)
	if !ok {
		t.Fatal("no entity in ctx")
	}
	return gid
}
