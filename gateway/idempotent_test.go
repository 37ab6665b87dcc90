package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// waiting waits until name has an open waiter on g (a send waiting for its
// reply, a long-poll).
func waiting(t *testing.T, g *gateway.Gateway, name string) {
	t.Helper()
	gatewaytest.Eventually(t, 10*time.Second, name+" waits", func() bool {
		for _, e := range g.Core().Roster().Entities {
			if e.Name == name && e.Waiting {
				return true
			}
		}
		return false
	})
}

// drainOne has w drain its inbox: exactly one message, with body.
func drainOne(t *testing.T, w *gatewaytest.Conn, body string) {
	t.Helper()
	r := w.MustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained")
	if len(r.Messages) != 1 || r.Messages[0].Body != body {
		t.Fatalf("%s drained %+v, want the one %q", w.Name, r.Messages, body)
	}
	w.MustStatus("bridge_poll", map[string]any{}, "empty")
}

// TestRequestIDAcrossRestart: the same request_id before and after a
// gateway restart delivers one message; the second result is deduped.
func TestRequestIDAcrossRestart(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	p := gatewaytest.StdioConn(t, g, "lead", "primary")
	gatewaytest.HTTPConn(t, g, "w", "worker")
	args := map[string]any{"target": "w", "message": "brief", "request_id": "once-1"}
	first := p.MustStatus("bridge_send", args, "confirmed")
	g.Close()
	g2 := gatewaytest.StartLocal(t, dir)
	var again gatewaytest.CallResult
	gatewaytest.Eventually(t, 10*time.Second, "the relay is back", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := p.CallCtx(ctx, "bridge_send", args)
		again = r
		return err == nil && !r.IsError
	})
	if !again.Deduped || again.MsgID != first.MsgID || again.Status != "confirmed" {
		t.Fatalf("after the restart: %+v (%s), want deduped %s", again.Result, again.Text, first.MsgID)
	}
	drainOne(t, gatewaytest.HTTPConn(t, g2, "w", "worker"), "brief")
}

// TestRelayRetriesCutCall: a relayed bridge_send waiting for its reply
// when the gateway restarts is re-issued by the relay with the request_id
// it stamped, so the agent gets the reply — not an error to call again —
// and the worker got the brief once.
func TestRelayRetriesCutCall(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	p := gatewaytest.StdioConn(t, g, "lead", "primary")
	gatewaytest.HTTPConn(t, g, "w", "worker")
	type out struct {
		r   gatewaytest.CallResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := p.CallCtx(ctx, "bridge_send", map[string]any{"target": "w", "message": "brief", "wait_s": 8})
		done <- out{r, err}
	}()
	waiting(t, g, "lead")
	g.Close()
	g2 := gatewaytest.StartLocal(t, dir)
	waiting(t, g2, "lead") // the relay re-issued the cut call, which resumed the wait
	w := gatewaytest.HTTPConn(t, g2, "w", "worker")
	drainOne(t, w, "brief")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "done"}, "confirmed")
	var o out
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the relayed call never returned")
	}
	if o.err != nil || o.r.IsError || o.r.Status != "replied" || !o.r.Deduped {
		t.Fatalf("relayed call across the restart: %+v %q %v", o.r.Result, o.r.Text, o.err)
	}
	if len(o.r.Messages) != 1 || o.r.Messages[0].Body != "done" {
		t.Fatalf("reply %+v", o.r.Messages)
	}
}
