package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestHistoryTool: an entity registered with history on (over the stdio
// relay, as `herdbridge mcp --history` does) re-reads its exchange with
// bridge_history after draining it, fenced and in order; the file is
// 0600; `herdbridge history purge` through the running gateway empties
// it; an entity without history is told how to turn it on.
func TestHistoryTool(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	on := true
	lead := gatewaytest.RelayConn(t, g, gateway.Request{Op: "mcp", Name: "lead", Role: "primary", History: &on})
	w := gatewaytest.HTTPConn(t, g, "w", "worker")
	var want []string
	for i := range 10 {
		brief, reply := fmt.Sprintf("brief %d", i), fmt.Sprintf("reply %d", i)
		lead.MustStatus("bridge_send", map[string]any{"target": "w", "message": brief}, "confirmed")
		if r := w.MustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained"); r.Messages[0].Body != brief {
			t.Fatalf("worker drained %q", r.Messages[0].Body)
		}
		w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": reply}, "confirmed")
		if r := lead.MustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained"); r.Messages[0].Body != reply {
			t.Fatalf("lead drained %q", r.Messages[0].Body)
		}
		want = append(want, brief, reply)
	}
	r := lead.MustStatus("bridge_history", map[string]any{"target": "w", "max": 100}, "history")
	var got []string
	for _, e := range r.History.Entries {
		got = append(got, e.Body)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history %q, want %q", got, want)
	}
	if !strings.Contains(r.Text, "<<<body-") || !strings.Contains(r.Text, "in REPLY from w") {
		t.Fatalf("history text is not fenced per entry: %s", r.Text)
	}
	fi, err := os.Stat(filepath.Join(dir, "history", "lead.jsonl"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v, want mode 0600", err)
	}
	if r := w.Call("bridge_history", nil); !r.IsError || !strings.Contains(r.Text, "--history") {
		t.Fatalf("history of an entity without it: %+v %s", r.Result, r.Text)
	}
	if n, err := gateway.PurgeHistory(dir, "lead"); err != nil || n != 1 {
		t.Fatalf("purge through the gateway: %d files, %v", n, err)
	}
	if r := lead.MustStatus("bridge_history", nil, "history"); len(r.History.Entries) != 0 {
		t.Fatalf("history after purge: %d entries", len(r.History.Entries))
	}
}
