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
// come back; the primary answers the turn it received before the restart
// and the worker's bridge_ask(turn_id) gets answered.
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
	cut := make(chan error, 1)
	go func() {
		_, err := w.CallCtx(context.Background(), "bridge_ask", map[string]any{"question": "which branch?", "target": "lead"})
		cut <- err
	}()
	got := <-polled
	if got.Status != "drained" || got.TurnID == "" {
		t.Fatalf("lead polled %+v (%s)", got.Result, got.Text)
	}
	turn := got.TurnID
	g.Close()
	<-cut // the relay tells the worker to call again

	gatewaytest.StartLocal(t, dir)
	// the worker keeps waiting on its ask (the turn_id a pending result
	// gave it), once its relay has reconnected
	resumed := make(chan gatewaytest.CallResult, 1)
	go func() { resumed <- retryCall(t, w, "bridge_ask", map[string]any{"turn_id": turn}) }()
	ans := retryCall(t, p, "bridge_send", map[string]any{"target": "w", "message": "main", "turn_id": turn})
	if ans.Status != "delivered" {
		t.Fatalf("answer after the restart: %+v (%s)", ans.Result, ans.Text)
	}
	if r := <-resumed; r.Status != "answered" || len(r.Messages) != 1 || r.Messages[0].Body != "main" {
		t.Fatalf("resumed ask: %+v (%s)", r.Result, r.Text)
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
