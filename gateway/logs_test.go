package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// TestJSONLogsCarryTraceIDs: a gateway logging JSON (slog's JSONHandler, as
// --log-format json sets it up) through a brief typed into a pane, the
// reply, a poll and a refused message writes only lines that parse, and
// every line that names a message (msgId) names its trace (traceId).
func TestJSONLogsCarryTraceIDs(t *testing.T) {
	var logs testlog.Buffer
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	leadGID, tok := gatewaytest.Register(t, g, "lead", "primary")
	lead := gatewaytest.TokenConn(t, g.URL(), "lead", tok)
	w := gatewaytest.PaneConn(t, g, "w", "worker", pane)
	lead.MustStatus("bridge_send", map[string]any{"target": "w", "message": "build it"}, "submitted")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "built"}, "confirmed")
	gatewaytest.Eventually(t, 10*time.Second, "the reply held", func() bool { h, _ := g.Core().Held(leadGID); return h.Total > 0 })
	lead.MustStatus("bridge_poll", map[string]any{}, "drained")
	now := time.Now()
	forged := &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(), From: uuid.NewString(), To: uuid.NewString(),
		Host: g.Host(), TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
	if err := g.Transport().Publish(context.Background(), leadGID, forged, true); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	gatewaytest.Eventually(t, 10*time.Second, "the refusal and its dead letter logged", func() bool {
		seen = checkJSONLines(t, logs.String())
		return seen["message refused"] && seen["dead letter"]
	})
	for _, msg := range []string{"sent", "forward path", "arrived", "gateway serving"} {
		if !seen[msg] {
			t.Errorf("no %q line in the log", msg)
		}
	}
}

// checkJSONLines fails the test on a line that is not a JSON object with
// time, level and msg, or that has a msgId without a traceId; it returns
// the messages (msg) of the lines about a message.
func checkJSONLines(t *testing.T, out string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON (%v): %s", err, sc.Bytes())
		}
		msg, _ := line["msg"].(string)
		if line["time"] == nil || line["level"] == nil || msg == "" {
			t.Fatalf("a log line without time, level or msg: %s", sc.Bytes())
		}
		seen[msg] = true
		if id, _ := line[bridge.LogMsgID].(string); id != "" {
			if tr, _ := line[bridge.LogTraceID].(string); tr == "" {
				t.Errorf("a line about message %s has no traceId: %s", id, sc.Bytes())
			}
		}
	}
	return seen
}
