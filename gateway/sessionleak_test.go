package gateway_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestNudgedSessionCallsStayFlat: a long-lived streamable HTTP session
// that was nudged once makes 2,000 small calls; the live heap must not
// grow with the number of calls. It does today — the soak's RSS climbs
// ~25% in 10 minutes — because mcp-go v1.2.1 keeps one resumableStream
// per POST answered as SSE (every call after the session's first
// notification) in StreamableHTTPServer.resumableStreams until the
// session ends (DELETE, or 15 minutes idle): ~375 B a call. Nothing in
// herdbridge can reach that map; the fix belongs in mcp-go (drop a
// request's stream once its events are evicted from the event store) or
// in a patched copy. Skipped unless HB_KNOWN_LEAKS is set, so the suite
// stays green while the bug is open; without the nudge the same calls
// grow nothing.
func TestNudgedSessionCallsStayFlat(t *testing.T) {
	if os.Getenv("HB_KNOWN_LEAKS") == "" {
		t.Skip("known leak in mcp-go v1.2.1 (~375 B per call on a nudged session): set HB_KNOWN_LEAKS=1 to run")
	}
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
