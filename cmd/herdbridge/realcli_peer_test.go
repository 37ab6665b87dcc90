package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// answerBrief runs a worker peer for a real-CLI test: it waits for a brief
// containing "brief one", replies "hi from peer" to lead (the primary's
// wait_s gets replied), then sends "a note from peer", held for lead until
// it polls (drained). It stops when the test ends.
func answerBrief(t *testing.T, peer *gatewaytest.Conn, lead string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		call := func(tool string, args map[string]any) (gatewaytest.CallResult, bool) {
			c, stop := context.WithTimeout(ctx, 20*time.Second)
			defer stop()
			r, err := peer.CallCtx(c, tool, args)
			if err != nil && ctx.Err() == nil {
				t.Logf("peer %s: %v", tool, err)
			}
			return r, err == nil
		}
		for ctx.Err() == nil {
			r, ok := call("bridge_poll", map[string]any{"wait_s": 3})
			if !ok {
				return
			}
			if !strings.Contains(r.Text, "brief one") {
				continue
			}
			if _, ok := call("bridge_send", map[string]any{"target": lead, "message": "hi from peer"}); !ok {
				return
			}
			time.Sleep(300 * time.Millisecond) // the reply lands before the note
			call("bridge_send", map[string]any{"target": lead, "message": "a note from peer"})
			return
		}
	}()
}

// cliEnv is a clean environment for a real CLI: PATH, HOME and TERM, and
// extra; nothing of the test runner's own HERDBRIDGE_* or API keys.
func cliEnv(home string, extra ...string) []string {
	return append([]string{"PATH=" + getenvDefault("PATH", "/usr/bin:/bin"), "HOME=" + home, "TERM=dumb", "NO_COLOR=1"}, extra...)
}

func getenvDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// logPayload logs one tool result exactly as a CLI's model saw it, under a
// fixed header ("model payload [<cli> <status>]") so the payloads of a
// -v run can be cut out verbatim (the note lists them per CLI).
func logPayload(t *testing.T, cli, status, seen string) {
	t.Helper()
	t.Logf("model payload [%s %s]:\n%s", cli, status, seen)
}
