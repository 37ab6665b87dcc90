package mcp

import (
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

func TestClientWaitCap(t *testing.T) {
	cases := []struct {
		name     string
		progress bool
		want     time.Duration
	}{
		{"codex-mcp-client", true, 270 * time.Second}, // progress does not extend Codex's 300 s
		{"pi-mcp-herdbridge", false, 54 * time.Second},
		{"gemini-cli-mcp-client", true, 540 * time.Second},
		{"claude-code", true, 0}, // progress resets its idle timer
		{"claude-code", false, 270 * time.Second},
		{"claude-code-x", false, 0}, // a name, not a prefix
		{"some-other-client", false, 0},
		{"", false, 0},
	}
	for _, c := range cases {
		if got := clientWaitCap(c.name, c.progress); got != c.want {
			t.Errorf("clientWaitCap(%q, progress=%v) = %v, want %v", c.name, c.progress, got, c.want)
		}
	}
}

// TestClientCeilingCapsCalls: a call from a client whose ceiling is below
// --max-wait is capped below that ceiling (its next step names the cap it
// may wait), one from a client with a higher ceiling or none by --max-wait.
// The client is known from the clientInfo its session gave at initialize.
func TestClientCeilingCapsCalls(t *testing.T) {
	s, c := testServer(t, 120*time.Second)
	w1 := entity(t, c, "w1", bridge.RoleWorker)
	for _, tc := range []struct{ client, want string }{
		{"pi-mcp-herdbridge", "bridge_poll(wait_s=54)"},
		{"codex-mcp-client", "bridge_poll(wait_s=120)"},
		{"herdbridge-test", "bridge_poll(wait_s=120)"},
	} {
		sess := &connSession{id: "sock-" + tc.client, notes: make(chan mcpgo.JSONRPCNotification, 8)}
		sess.SetClientInfo(mcpgo.Implementation{Name: tc.client, Version: "1"})
		ctx := s.mcp.WithContext(w1, sess)
		sc := says(t, tc.client, callTool(t, s, ctx, "bridge_poll", nil))
		wantResult(t, tc.client+" empty poll", sc, bridge.StatusEmpty, tc.want)
	}
}

// TestClientCeilingEndsTheWait: a pi client's long poll ends pending at
// its cap, before pi's 60 s, though --max-wait is longer. (The pi ceiling
// is scaled down here so the test does not wait 54 s.)
func TestClientCeilingEndsTheWait(t *testing.T) {
	saved := clientCeilings
	t.Cleanup(func() { clientCeilings = saved })
	clientCeilings = []clientCeiling{{name: "pi-mcp-", ceiling: 500 * time.Millisecond}}
	s, c := testServer(t, 30*time.Second)
	w1 := entity(t, c, "w1", bridge.RoleWorker)
	sess := &connSession{id: "sock-pi", notes: make(chan mcpgo.JSONRPCNotification, 8)}
	sess.SetClientInfo(mcpgo.Implementation{Name: "pi-mcp-herdbridge", Version: "1"})
	start := time.Now()
	sc := says(t, "pi long poll", callTool(t, s, s.mcp.WithContext(w1, sess), "bridge_poll", map[string]any{"wait_s": 20}))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the poll waited %v: the client's ceiling did not cap it", took)
	}
	wantResult(t, "pi long poll", sc, bridge.StatusPending, "wait_s=0.45")
}
