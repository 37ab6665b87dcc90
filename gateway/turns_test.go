package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestAskSurvivesGatewayRestart: a worker's ask is open, its primary has
// read the question, and the gateway restarts. Over the stdio relay both
// come back: the relay re-issues the worker's cut bridge_ask (with the
// request_id it stamped) and the restarted gateway resumes the persisted
// turn; the primary answers the turn it received before the restart, and
// the worker's original call returns answered. A bridge_ask(turn_id) after
// that sees the same answer.
func TestAskSurvivesGatewayRestart(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	p := gatewaytest.StdioConn(t, g, "lead", "primary")
	w := gatewaytest.StdioConn(t, g, "w", "worker")
	polled := make(chan gatewaytest.CallResult, 1)
	go func() { polled <- p.Call("bridge_poll", map[string]any{"wait_s": 8}) }()
	gatewaytest.Eventually(t, 5*time.Second, "lead long-polls", func() bool {
		_, waiting := g.Core().Held(p.GID(t, g))
		return waiting
	})
	type outcome struct {
		r   gatewaytest.CallResult
		err error
	}
	asked := make(chan outcome, 1)
	go func() {
		r, err := w.CallCtx(context.Background(), "bridge_ask", map[string]any{"question": "which branch?", "target": "lead"})
		asked <- outcome{r, err}
	}()
	got := <-polled
	if got.Status != "asked" || got.TurnID == "" {
		t.Fatalf("lead polled %+v (%s)", got.Result, got.Text)
	}
	turn := got.TurnID
	g.Close()

	gatewaytest.StartLocal(t, dir)
	ans := retryCall(t, p, "bridge_send", map[string]any{"target": "w", "message": "main", "turn_id": turn})
	if ans.Status != "delivered" {
		t.Fatalf("answer after the restart: %+v (%s)", ans.Result, ans.Text)
	}
	select {
	case o := <-asked:
		if o.err != nil || o.r.Status != "answered" || len(o.r.Messages) != 1 || o.r.Messages[0].Body != "main" {
			t.Fatalf("the cut ask, re-issued by the relay: %+v (%s) %v", o.r.Result, o.r.Text, o.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cut ask never returned after the restart")
	}
	if r := retryCall(t, w, "bridge_ask", map[string]any{"turn_id": turn}); r.Status != "answered" || len(r.Messages) != 1 || r.Messages[0].Body != "main" {
		t.Fatalf("bridge_ask(turn_id) after the answer: %+v (%s)", r.Result, r.Text)
	}
}

// retryCall calls tool until the relay has reconnected to the restarted
// gateway (the calls before say to call again).
func retryCall(t *testing.T, c *gatewaytest.Conn, tool string, args map[string]any) gatewaytest.CallResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := c.CallCtx(ctx, tool, args)
		cancel()
		if err == nil && !(r.IsError && strings.Contains(r.Text, "call it again")) {
			return r
		}
		if time.Now().After(deadline) {
			t.Errorf("%s after the restart: %+v %v", tool, r, err)
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMissedAskRemindsPrimaryInPane: a question nobody waited for nudges
// its primary like a held reply: a reminder typed into its idle pane and
// an MCP notification on its session; the primary drains the MISSED_ASK.
func TestMissedAskRemindsPrimaryInPane(t *testing.T) {
	fake := herdrtest.New(t)
	ppane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	p := gatewaytest.PaneConn(t, g, "lead", "primary", ppane)
	w := gatewaytest.HTTPConn(t, g, "w", "worker")
	asked := w.MustStatus("bridge_ask", map[string]any{"question": "which branch?", "target": "lead"}, "no_waiter")
	gatewaytest.Eventually(t, 5*time.Second, "a reminder typed", func() bool { return len(fake.Submitted(ppane)) >= 1 })
	if s := fake.Submitted(ppane)[0]; !strings.Contains(s, "1 message(s) held") {
		t.Fatalf("reminder %q", s)
	}
	gatewaytest.Eventually(t, 5*time.Second, "an MCP nudge", func() bool {
		select {
		case n := <-p.Notes:
			return n.Method == "notifications/message"
		default:
			return false
		}
	})
	got := p.MustStatus("bridge_poll", map[string]any{}, "drained")
	if m := got.Messages; len(m) != 1 || m[0].Kind != "MISSED_ASK" || m[0].Body != "which branch?" || m[0].TurnID != asked.TurnID {
		t.Fatalf("primary drained %+v", got.Result)
	}
}
