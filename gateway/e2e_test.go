package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

type dialer func(t testing.TB, g *gateway.Gateway, name, role string, groups ...string) *gatewaytest.Conn

var transports = []struct {
	name string
	dial dialer
}{
	{"stdio", gatewaytest.StdioConn},
	{"sse", gatewaytest.SSEConn},
	{"http", gatewaytest.HTTPConn},
}

// TestFlows drives the main flows with every transport as the primary and
// as the worker.
func TestFlows(t *testing.T) {
	for _, pt := range transports {
		for _, wt := range transports {
			t.Run(pt.name+"-primary/"+wt.name+"-worker", func(t *testing.T) {
				t.Parallel()
				g := gatewaytest.StartLocal(t, "")
				p := pt.dial(t, g, "lead", "primary")
				w := wt.dial(t, g, "worker-1", "worker", "build")
				flows(t, p, w)
			})
		}
	}
}

func flows(t *testing.T, p, w *gatewaytest.Conn) {
	// brief + reply resolving the open send
	var wg sync.WaitGroup
	var sent gatewaytest.CallResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-1", "message": "build the thing", "wait_s": 6})
	}()
	got := waitPoll(t, w, "build the thing")
	if got.Messages[0].Kind != "SEND" || got.Messages[0].FromName != "lead" {
		t.Fatalf("worker got %+v", got.Messages[0])
	}
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "built"}, "confirmed")
	wg.Wait()
	if sent.Status != "replied" || len(sent.Messages) != 1 || sent.Messages[0].Body != "built" {
		t.Fatalf("open send = %+v (%s)", sent.Result, sent.Text)
	}
	if sent.TraceID == "" || sent.Messages[0].TraceID != sent.TraceID {
		t.Fatalf("reply trace %q does not carry the brief's trace %q", sent.Messages[0].TraceID, sent.TraceID)
	}

	// ask with an open send waiting → asked; answer → delivered; ask returns answered
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-1", "message": "next step", "wait_s": 6})
	}()
	waitPoll(t, w, "next step")
	var asked gatewaytest.CallResult
	var awg sync.WaitGroup
	awg.Add(1)
	go func() {
		defer awg.Done()
		asked = w.Call("bridge_ask", map[string]any{"question": "which branch?"})
	}()
	wg.Wait()
	if sent.Status != "asked" || sent.TurnID == "" || sent.Messages[0].Body != "which branch?" {
		t.Fatalf("open send should return the ask: %+v (%s)", sent.Result, sent.Text)
	}
	ans := p.MustStatus("bridge_send", map[string]any{"target": "worker-1", "message": "main", "turn_id": sent.TurnID}, "delivered")
	awg.Wait()
	if asked.Status != "answered" || asked.Messages[0].Body != "main" || asked.TurnID != sent.TurnID {
		t.Fatalf("ask = %+v (%s)", asked.Result, asked.Text)
	}
	// a second answer to the same turn
	p.MustStatus("bridge_send", map[string]any{"target": "worker-1", "message": "dev", "turn_id": sent.TurnID}, "already_answered")
	_ = ans

	// ask with nobody waiting → no_waiter at once, and the primary finds a
	// MISSED_ASK it drains; answering its turn is too late
	start := time.Now()
	missed := w.MustStatus("bridge_ask", map[string]any{"question": "anyone?"}, "no_waiter")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("no_waiter took %v", d)
	}
	// the notice reaches the primary through its inbox's consumer, which
	// may still be settling the ASK when the asker hears NO_WAITER: a poll
	// that does not wait can run before it is held (CI saw "empty" once)
	trace := p.MustStatus("bridge_poll", map[string]any{"target": "worker-1", "wait_s": 5}, "drained")
	if m := trace.Messages; len(m) != 1 || m[0].Kind != "MISSED_ASK" || m[0].Body != "anyone?" || m[0].FromName != "worker-1" || m[0].TurnID != missed.TurnID {
		t.Fatalf("primary drained %+v, want the MISSED_ASK of turn %s", trace.Result, missed.TurnID)
	}
	p.MustStatus("bridge_send", map[string]any{"target": "worker-1", "message": "yes", "turn_id": missed.TurnID}, "too_late")

	// late answer → too_late: the ask expires while the primary holds it
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-1", "message": "third", "wait_s": 6})
	}()
	waitPoll(t, w, "third")
	late := w.Call("bridge_ask", map[string]any{"question": "quick?", "timeout_s": 1})
	wg.Wait()
	if sent.Status != "asked" {
		t.Fatalf("open send should return the ask: %+v", sent.Result)
	}
	if late.Status != "expired" {
		t.Fatalf("short ask = %+v (%s)", late.Result, late.Text)
	}
	p.MustStatus("bridge_send", map[string]any{"target": "worker-1", "message": "too late", "turn_id": sent.TurnID}, "too_late")

	// broadcast reaches others, not the sender
	p.MustStatus("bridge_broadcast", map[string]any{"message": "all hands"}, "confirmed")
	b := waitPoll(t, w, "all hands")
	if b.Messages[0].Kind != "BROADCAST" {
		t.Fatalf("broadcast kind %s", b.Messages[0].Kind)
	}
	p.MustStatus("bridge_broadcast", map[string]any{"message": "builders only", "group": "build"}, "confirmed")
	waitPoll(t, w, "builders only")
	if r := p.Call("bridge_poll", map[string]any{}); r.Status != "empty" {
		t.Fatalf("sender got its own broadcast: %+v", r.Result)
	}
}

// waitPoll long-polls until a message with body arrives.
func waitPoll(t *testing.T, c *gatewaytest.Conn, body string) gatewaytest.CallResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := c.Call("bridge_poll", map[string]any{"wait_s": 2})
		if r.IsError {
			t.Fatalf("poll: %s", r.Text)
		}
		for _, m := range r.Messages {
			if m.Body == body {
				return r
			}
		}
		if len(r.Messages) > 0 {
			t.Fatalf("%s: unexpected messages %+v while waiting for %q", c.Name, r.Messages, body)
		}
	}
	t.Fatalf("%s: %q never arrived", c.Name, body)
	return gatewaytest.CallResult{}
}

func TestPollFiltersOnFrom(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	a := gatewaytest.StdioConn(t, g, "wa", "worker")
	b := gatewaytest.SSEConn(t, g, "wb", "worker")
	a.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "from a"}, "confirmed")
	b.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "from b"}, "confirmed")
	a.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "from a again"}, "confirmed")
	r := p.MustStatus("bridge_poll", map[string]any{"target": "wb", "wait_s": 3}, "drained")
	if len(r.Messages) != 1 || r.Messages[0].Body != "from b" {
		t.Fatalf("filtered poll: %+v", r.Messages)
	}
	if r.Held == nil || r.Held.Total != 2 {
		t.Fatalf("held after filtered poll: %+v", r.Held)
	}
	peek := p.MustStatus("bridge_poll", map[string]any{"peek": true}, "peeked")
	if len(peek.Messages) != 2 {
		t.Fatalf("peek: %+v", peek.Messages)
	}
	r = p.MustStatus("bridge_poll", map[string]any{"target": "wa"}, "drained")
	if len(r.Messages) != 2 || r.Messages[0].Body != "from a" || r.Messages[1].Body != "from a again" {
		t.Fatalf("order: %+v", r.Messages)
	}
	p.MustStatus("bridge_poll", map[string]any{}, "empty")
}

func TestBadInput(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	gatewaytest.StdioConn(t, g, "worker-1", "worker")
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"bridge_send", map[string]any{"target": "workr-1", "message": "x"}, "did you mean worker-1"},
		{"bridge_send", map[string]any{"target": "nobody-here", "message": "x"}, `unknown target "nobody-here"`},
		{"bridge_send", map[string]any{"target": "worker-1", "message": strings.Repeat("x", 300<<10)}, "over the"},
		{"bridge_send", map[string]any{"target": "worker-1", "message": "x", "wait_s": "soon"}, "wait_s must be a number"},
		{"bridge_send", map[string]any{"target": "worker-1", "message": "x", "from": "worker-1"}, `unknown argument "from"`},
		{"bridge_send", map[string]any{"target": "worker-1", "message": "x", "wait_s": -1}, "wait_s must be"},
		{"bridge_send", map[string]any{"target": "worker-1", "message": "   "}, "message is empty"},
		{"bridge_send", map[string]any{"target": "lead", "message": "me"}, "is you"},
		{"bridge_send", map[string]any{"target": "worker-1", "message": "x", "turn_id": "0c3f6b2e-0000-4000-8000-000000000000"}, "no open ask"},
		{"bridge_poll", map[string]any{"max": 0}, "max must be"},
		{"bridge_broadcast", map[string]any{"message": "x", "group": "Bad Group!"}, "not valid"},
		{"bridge_ask", map[string]any{"question": "why?"}, "no current brief"},
	}
	for _, c := range cases {
		r := p.Call(c.tool, c.args)
		if !r.IsError || !strings.Contains(r.Text, c.want) {
			t.Errorf("%s(%v): isError=%v text=%q, want error containing %q", c.tool, c.args, r.IsError, r.Text, c.want)
		}
	}
	// a client that sends numbers as text is understood
	p.MustStatus("bridge_poll", map[string]any{"max": "3", "wait_s": "0"}, "empty")
	// nothing was stored by any of them
	if held := p.Call("bridge_roster", nil); held.IsError {
		t.Fatal(held.Text)
	}
	for _, e := range g.Core().Roster().Entities {
		if e.Held != 0 {
			t.Errorf("%s holds %d after bad input", e.Name, e.Held)
		}
	}
}

// TestLimitsThroughMCP: a body of NUL and a 600 KB target are refused as
// tool errors that name the limit and echo at most a short prefix.
func TestLimitsThroughMCP(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.StdioConn(t, g, "worker-1", "worker")
	huge := "\x1b" + strings.Repeat("A", 600<<10-1)
	cases := []struct {
		c    *gatewaytest.Conn
		tool string
		args map[string]any
		want []string
	}{
		{p, "bridge_send", map[string]any{"target": "worker-1", "message": "\x00"}, []string{"message is empty", "no visible text"}},
		{p, "bridge_broadcast", map[string]any{"message": "\x00\x00 \n"}, []string{"message is empty"}},
		{w, "bridge_ask", map[string]any{"target": "lead", "question": "\u200b"}, []string{"empty"}},
		{p, "bridge_send", map[string]any{"target": huge, "message": "x"}, []string{"target", fmt.Sprintf("%d bytes", 600<<10), `\x1b`}},
		{p, "bridge_poll", map[string]any{"target": huge}, []string{"target", "bytes"}},
	}
	for _, c := range cases {
		r := c.c.Call(c.tool, c.args)
		if !r.IsError || len(r.Text) > 400 {
			t.Fatalf("%s: isError=%v, %d bytes: %.300q", c.tool, r.IsError, len(r.Text), r.Text)
		}
		for _, s := range c.want {
			if !strings.Contains(r.Text, s) {
				t.Errorf("%s: %q does not mention %q", c.tool, r.Text, s)
			}
		}
	}
	for _, e := range g.Core().Roster().Entities {
		if e.Held != 0 {
			t.Errorf("%s holds %d after refused input", e.Name, e.Held)
		}
	}
}

func TestHTTPAuth(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	gatewaytest.Register(t, g, "lead", "primary")
	for _, path := range []string{"/mcp", "/sse", "/message"} {
		for _, hdr := range []string{"", "Bearer nope", "Basic abc"} {
			req, _ := http.NewRequest("POST", g.URL()+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with %q: %d, want 401", path, hdr, resp.StatusCode)
			}
		}
	}
}

// TestProgressAndPending: a wait past the cap returns pending and progress
// notifications arrive meanwhile when the client asked for them.
func TestProgressAndPending(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.StartLocal(t, "")
			p := tr.dial(t, g, "lead", "primary")
			gatewaytest.StdioConn(t, g, "w", "worker")
			req := mcpgo.CallToolRequest{}
			req.Params.Name = "bridge_send"
			req.Params.Arguments = map[string]any{"target": "w", "message": "go", "wait_s": 60}
			req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok-1"}
			start := time.Now()
			res, err := p.Client.CallTool(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 7*time.Second || d > 15*time.Second {
				t.Fatalf("capped wait took %v, cap is 8s", d)
			}
			if st, _ := res.StructuredContent.(map[string]any); st["status"] != "pending" {
				t.Fatalf("result %+v", res.StructuredContent)
			}
			n := 0
			for len(p.Notes) > 0 {
				if note := <-p.Notes; note.Method == "notifications/progress" {
					n++
				}
			}
			if n < 3 {
				t.Fatalf("got %d progress notifications over 8s at 300ms, want several", n)
			}
		})
	}
}

// TestNudge: a reply held for a primary with no waiter nudges its sessions
// (the resource update because it subscribed to its inbox).
func TestNudge(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.StartLocal(t, "")
			p := tr.dial(t, g, "lead", "primary")
			subscribeInbox(t, p)
			w := gatewaytest.StdioConn(t, g, "w", "worker")
			w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "done"}, "confirmed")
			deadline := time.After(5 * time.Second)
			var sawLog, sawRes bool
			for !(sawLog && sawRes) {
				select {
				case n := <-p.Notes:
					switch n.Method {
					case "notifications/message":
						sawLog = true
					case "notifications/resources/updated":
						sawRes = fmt.Sprint(n.Params.AdditionalFields["uri"]) == "bridge://inbox"
					}
				case <-deadline:
					t.Fatalf("nudge: log=%v resource=%v", sawLog, sawRes)
				}
			}
		})
	}
}

// TestManyLongPolls: one stdio session holds many long-polls at once (mcp-go's
// own stdio server would serve 5 and queue the rest).
func TestManyLongPolls(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.StdioConn(t, g, "lead", "primary")
	workers := make([]*gatewaytest.Conn, 12)
	for i := range workers {
		workers[i] = gatewaytest.HTTPConn(t, g, fmt.Sprintf("w%d", i), "worker")
	}
	var wg sync.WaitGroup
	results := make([]gatewaytest.CallResult, len(workers))
	for i := range workers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = p.Call("bridge_poll", map[string]any{"target": fmt.Sprintf("w%d", i), "wait_s": 8})
		}(i)
	}
	time.Sleep(500 * time.Millisecond) // let every poll become a waiter
	start := time.Now()
	for i, w := range workers {
		w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": fmt.Sprintf("r%d", i)}, "confirmed")
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("12 concurrent polls took %v: some were queued behind others", d)
	}
	for i, r := range results {
		if r.Status != "drained" || r.Messages[0].Body != fmt.Sprintf("r%d", i) {
			t.Fatalf("poll %d: %+v", i, r.Result)
		}
	}
}

// TestCancelledCallAbandons: a worker's ask cancelled mid-wait makes the
// primary's answer abandoned; a cancelled poll loses nothing.
func TestCancelledCallAbandons(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.StdioConn(t, g, "w", "worker")
	var wg sync.WaitGroup
	var sent gatewaytest.CallResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "w", "message": "task", "wait_s": 6})
	}()
	waitPoll(t, w, "task")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := w.CallCtx(ctx, "bridge_ask", map[string]any{"question": "q?"})
		errc <- err
	}()
	wg.Wait()
	if sent.Status != "asked" {
		t.Fatalf("send: %+v", sent.Result)
	}
	cancel()
	<-errc
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := p.Call("bridge_send", map[string]any{"target": "w", "message": "a", "turn_id": sent.TurnID})
		if r.Status == "abandoned" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("answer after cancel: %+v (%s)", r.Result, r.Text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRelayReconnects: `herdbridge mcp` survives a gateway restart: the
// call open at the time gets an error saying to retry, and the next calls
// work on the same entity without restarting the MCP server.
func TestRelayReconnects(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	p := gatewaytest.StdioConn(t, g, "lead", "primary")
	w := gatewaytest.HTTPConn(t, g, "w", "worker")
	gatewaytest.HTTPConn(t, g, "quiet", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "before"}, "confirmed")
	inflight := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := p.CallCtx(ctx, "bridge_poll", map[string]any{"target": "quiet", "wait_s": 8})
		switch {
		case err != nil:
		case r.IsError && strings.Contains(r.Text, "call it again"):
			err = errors.New("restarted: " + r.Text)
		default:
			err = fmt.Errorf("in-flight call returned %+v %q", r.Result, r.Text)
		}
		inflight <- err
	}()
	time.Sleep(300 * time.Millisecond)
	g.Close()
	if err := <-inflight; err == nil || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("in-flight call during restart: %v", err)
	}
	g2 := gatewaytest.StartLocal(t, dir)
	_ = g2
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := p.CallCtx(ctx, "bridge_poll", map[string]any{})
		cancel()
		if err == nil && r.Status == "drained" && r.Messages[0].Body == "before" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSendPollNeverDuplicates: many send+poll round trips on each transport
// each drain exactly the one reply sent. (Clients close HTTP connections
// as soon as they have a response; treating that as "not delivered" once
// put messages back to held and delivered them twice.)
func TestSendPollNeverDuplicates(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.StartLocal(t, "")
			p := tr.dial(t, g, "lead", "primary")
			w := tr.dial(t, g, "w", "worker")
			for i := 0; i < 400; i++ {
				body := fmt.Sprintf("r%d", i)
				w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": body}, "confirmed")
				r := p.MustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained")
				if len(r.Messages) != 1 || r.Messages[0].Body != body {
					t.Fatalf("round %d drained %+v", i, r.Messages)
				}
			}
		})
	}
}
