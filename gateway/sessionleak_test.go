package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestNudgedSessionCallsStayFlat: a long-lived streamable HTTP session
// that was nudged once makes 2,000 small calls; the live heap must not
// grow with the number of calls. mcp-go v1.2.1 keeps one resumableStream
// per POST answered as SSE in StreamableHTTPServer.resumableStreams until
// the session ends (~375 B a call), and its SendNotificationToSpecificClient
// makes every later POST of the session SSE; the gateway queues nudges on
// the session's notification channel instead (mcp/notify.go), so only the
// POST that carries a nudge gets a stream.
func TestNudgedSessionCallsStayFlat(t *testing.T) {
	cfg := gatewaytest.LocalConfig(t, "")
	cfg.NoSync = true
	g := gatewaytest.Start(t, cfg)
	lead, tok := gatewaytest.Register(t, g, "lead", "primary")
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	s := &rawSession{t: t, hc: hc, url: g.URL() + "/mcp", token: tok}
	s.post("initialize", map[string]any{"protocolVersion": rawProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "leaktest", "version": "1"}}, false)
	s.post("notifications/initialized", nil, true)
	g.MCPServer().Nudge(bridge.Entity{GID: lead, Name: "lead"}, bridge.HeldSummary{Total: 1})
	calls := func(n int) {
		for range n {
			s.post("tools/call", map[string]any{"name": "bridge_poll", "arguments": map[string]any{"wait_s": 0}}, false)
		}
	}
	n := 2000
	if raceEnabled {
		n = 500
	}
	calls(200) // warm up: pools, maps, the event store at its bound (256 events)
	heap0 := liveHeap()
	calls(n)
	heap1 := liveHeap()
	perCall := (float64(heap1) - float64(heap0)) / float64(n)
	t.Logf("%d calls on a nudged session: live heap %d → %d KiB, %.0f B a call", n, heap0>>10, heap1>>10, perCall)
	if perCall > 64 {
		t.Errorf("the live heap grows %.0f B a call on a long-lived session: it must stay flat", perCall)
	}
}
