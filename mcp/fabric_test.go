package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// The tool handlers tested on their own: each tool's table (tools_*_test.go)
// calls its handler with raw arguments, as the MCP server hands them over,
// against fakeFabric instead of a core, and checks the request the core
// would get, the error sentence, and both halves of the result — the text
// and structuredContent, fence and provenance included.

// caller is the gid every table calls as.
const caller = "0b6c3a52-1111-4e7e-9f00-000000000001"

// The fence nonces of every result here, in the order a result draws
// them (a second only when a body holds the first), so texts compare
// exactly.
const testNonce, testNonce2 = "n0nce", "n1nce"

// fakeFabric records what the handlers asked of the core and answers with
// the case's result or error.
type fakeFabric struct {
	gid    string
	req    any // the one request a handler passed (nil: not called)
	calls  int
	res    *bridge.Result
	err    error
	roster bridge.RosterView
	circle bridge.Circle
	cancel func() // called inside the call: the client cancels it meanwhile
}

func (f *fakeFabric) answer(ctx context.Context, gid string, req any) (*bridge.Result, error) {
	f.gid, f.req = gid, req
	f.calls++
	if f.cancel != nil {
		f.cancel()
	}
	if f.err != nil {
		return nil, f.err
	}
	if f.res == nil {
		return &bridge.Result{Status: bridge.StatusConfirmed}, nil
	}
	return f.res, nil
}

func (f *fakeFabric) Send(ctx context.Context, gid string, r bridge.SendRequest, _ bridge.Progress) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Ask(ctx context.Context, gid string, r bridge.AskRequest, _ bridge.Progress) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Poll(ctx context.Context, gid string, r bridge.PollRequest, _ bridge.Progress) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Broadcast(ctx context.Context, gid string, r bridge.BroadcastRequest) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Roster() bridge.RosterView {
	f.calls++
	return f.roster
}
func (f *fakeFabric) Circle(gid string) bridge.Circle {
	f.gid = gid
	return f.circle
}
func (f *fakeFabric) Spawn(ctx context.Context, gid string, r bridge.SpawnRequest) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) History(ctx context.Context, gid string, r bridge.HistoryRequest) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Stop(ctx context.Context, gid string, r bridge.StopRequest) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}
func (f *fakeFabric) Interrupt(ctx context.Context, gid string, r bridge.InterruptRequest, _ bridge.Progress) (*bridge.Result, error) {
	return f.answer(ctx, gid, r)
}

// toolCase is one call of a tool and what must come of it.
type toolCase struct {
	name string
	args string         // the raw JSON arguments
	res  *bridge.Result // what the fake core returns (nil: confirmed)
	err  error          // or the error it returns
	// roster is what the fake's Roster returns, circle its Circle
	roster bridge.RosterView
	circle bridge.Circle
	// cancelled: the client cancels the call while the core works on it
	cancelled bool
	// want is the request the core must get; nil: the handler must refuse
	// the call before reaching the core.
	want any
	// isError, and the exact reason sentence of a tool error.
	isError bool
	reason  string
	// text is the exact text content ("": not compared); has, lines it
	// must hold.
	text string
	has  []string
	// sc are fields structuredContent must have, compared as JSON.
	sc map[string]any
}

// runTool runs the cases of tool against a fresh fake each, failing on
// any difference.
func runTool(t *testing.T, tool string, cases []toolCase) {
	t.Helper()
	old := newNonce
	t.Cleanup(func() { newNonce = old })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			drawn := 0
			newNonce = func() string { drawn++; return []string{testNonce, testNonce2}[min(drawn, 2)-1] }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &fakeFabric{res: c.res, err: c.err, roster: c.roster, circle: c.circle}
			if c.cancelled {
				f.cancel = cancel
			}
			r := callFake(t, ctx, f, tool, c.args)
			checkCall(t, f, c)
			checkResult(t, r, c)
		})
	}
}

// callFake calls tool's handler as the entity caller, over f.
func callFake(t *testing.T, ctx context.Context, f Fabric, tool, args string) *mcpgo.CallToolResult {
	t.Helper()
	s := New(nil, nil)
	s.fab = f
	for _, td := range s.tools() {
		if td.Tool.Name == tool {
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.RawArguments = tool, json.RawMessage(args)
			r, err := td.Handler(WithEntity(ctx, caller), req)
			if err != nil {
				t.Fatalf("%s: a Go error, not a tool result: %v", tool, err)
			}
			return r
		}
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

func checkCall(t *testing.T, f *fakeFabric, c toolCase) {
	t.Helper()
	if c.want == nil {
		if f.calls != 0 {
			t.Errorf("the core was called (%+v): the handler must refuse these arguments itself", f.req)
		}
		return
	}
	if f.calls != 1 {
		t.Fatalf("the core was called %d times, want once", f.calls)
	}
	if f.gid != caller && f.req != nil {
		t.Errorf("called as %q, want the connection's entity %q", f.gid, caller)
	}
	if f.req != nil && !reflect.DeepEqual(f.req, c.want) {
		t.Errorf("the core got\n%#v\nwant\n%#v", f.req, c.want)
	}
}

func checkResult(t *testing.T, r *mcpgo.CallToolResult, c toolCase) {
	t.Helper()
	text := resultText(r)
	sc := structured(t, r)
	if r.IsError != c.isError {
		t.Errorf("isError %v, want %v:\n%s", r.IsError, c.isError, text)
	}
	if c.isError && sc["reason"] != c.reason {
		t.Errorf("reason %q, want %q", sc["reason"], c.reason)
	}
	if c.text != "" && text != c.text {
		t.Errorf("text:\n%s\nwant:\n%s", text, c.text)
	}
	for _, l := range c.has {
		if !strings.Contains(text, l) {
			t.Errorf("the text does not hold %q:\n%s", l, text)
		}
	}
	for k, want := range c.sc {
		if !sameJSON(sc[k], want) {
			got, _ := json.Marshal(sc[k])
			w, _ := json.Marshal(want)
			t.Errorf("structuredContent.%s = %s, want %s", k, got, w)
		}
	}
	if next, _ := sc["next"].(string); next == "" || !strings.Contains(text, "next: "+next) {
		t.Errorf("next %q missing or not the same in the text:\n%s", next, text)
	}
}

func resultText(r *mcpgo.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured is r's structuredContent as the client reads it (JSON).
func structured(t *testing.T, r *mcpgo.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.StructuredContent)
	if err != nil || r.StructuredContent == nil {
		t.Fatalf("no structuredContent (%v)", err)
	}
	var sc map[string]any
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// sameJSON compares got (decoded JSON) with want (any Go value) as JSON.
func sameJSON(got, want any) bool {
	raw, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var w any
	if json.Unmarshal(raw, &w) != nil {
		return false
	}
	return reflect.DeepEqual(got, w)
}

// TestToolsNeedAnEntity: every tool refuses a connection that is not an
// entity, with the same sentence, and never reaches the core.
func TestToolsNeedAnEntity(t *testing.T) {
	s := New(nil, nil)
	f := &fakeFabric{}
	s.fab = f
	for _, td := range s.tools() {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.RawArguments = td.Tool.Name, json.RawMessage(`{}`)
		r, err := td.Handler(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: %v", td.Tool.Name, err)
		}
		sc := structured(t, r)
		const why = "this connection is not registered as an entity"
		if !r.IsError || sc["reason"] != why || sc["next"] != "connect with a token or through herdbridge mcp --name" {
			t.Errorf("%s: %v %v", td.Tool.Name, r.IsError, sc)
		}
		if !strings.Contains(resultText(r), why) {
			t.Errorf("%s: the text does not say why: %s", td.Tool.Name, resultText(r))
		}
	}
	if f.calls != 0 {
		t.Errorf("the core was called %d times", f.calls)
	}
	if got := len(s.tools()); got != 9 {
		t.Errorf("%d tools, want the 9 these tables cover: a new tool needs its own", got)
	}
}

// userErr is a refusal the core words for the model.
func userErr(msg string) error { return &bridge.UserError{Msg: msg} }

var errBroken = errors.New("store: disk on fire")

func ptr[T any](v T) *T { return &v }
