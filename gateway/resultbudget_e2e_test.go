package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// Over MCP (streamable HTTP, stdio relay), a drain bigger than the result
// byte budget comes in several results, and each says how many are left
// and how to get them both in structuredContent (more, next) and in the
// text a model may be shown alone (the next: line); drained to the end,
// every message came once.
func TestResultBudgetToldInTextAndStructured(t *testing.T) {
	cfg := gatewaytest.LocalConfig(t, "")
	cfg.Core.ResultMaxBytes = 64 << 10
	g := gatewaytest.Start(t, cfg)
	for _, tc := range []struct {
		name string
		conn func(name, role string) *gatewaytest.Conn
	}{
		{"http", func(n, r string) *gatewaytest.Conn { return gatewaytest.HTTPConn(t, g, n, r) }},
		{"stdio", func(n, r string) *gatewaytest.Conn { return gatewaytest.StdioConn(t, g, n, r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, w := tc.conn("p-"+tc.name, "primary"), tc.conn("w-"+tc.name, "worker")
			const n = 40
			for i := range n {
				w.MustStatus("bridge_send", map[string]any{"target": p.Name, "message": fmt.Sprintf("tag-%d %s", i, strings.Repeat("x", 8<<10))}, "confirmed")
			}
			gatewaytest.WaitHeld(t, g, p.Name, n)
			seen := map[string]bool{}
			for calls := 0; len(seen) < n; calls++ {
				if calls > n {
					t.Fatalf("%d polls got %d of %d", calls, len(seen), n)
				}
				r := p.Call("bridge_poll", map[string]any{"max": 500})
				if r.IsError || len(r.Messages) == 0 {
					t.Fatalf("poll %d: %s with nothing, %d of %d seen", calls+1, r.Text, len(seen), n)
				}
				for _, m := range r.Messages {
					seen[strings.Fields(m.Body)[0]] = true
				}
				left := n - len(seen)
				if r.More != left {
					t.Fatalf("poll %d: more=%d, %d left", calls+1, r.More, left)
				}
				wantLine := fmt.Sprintf("next: %d more message(s) held for you did not fit", left)
				if left > 0 && (!strings.Contains(r.Text, wantLine) || !strings.HasPrefix(r.Next, wantLine[len("next: "):])) {
					t.Fatalf("poll %d with %d left: next %q, text ends %q: want %q in both", calls+1, left, r.Next, r.Text[max(0, len(r.Text)-300):], wantLine)
				}
				if calls == 0 && left == 0 {
					t.Fatal("the first poll took everything: no budget")
				}
			}
		})
	}
}
