package main

import (
	"bufio"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// runGateway runs `herdbridge gateway` with extra flags until it answers,
// stops it, and returns what it wrote to stderr.
func runGateway(t *testing.T, extra ...string) string {
	t.Helper()
	dir := gatewaytest.TempDir(t)
	var stderr testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args := append([]string{"gateway", "--state-dir", dir, "--listen", "127.0.0.1:0", "--host-id", "logs"}, extra...)
	go func() { done <- run(ctx, args, strings.NewReader(""), &testlog.Buffer{}, &stderr) }()
	gatewaytest.Eventually(t, 20*time.Second, "the gateway answering", func() bool { return gateway.Answers(dir) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gateway %v: %v", extra, err)
	}
	return stderr.String()
}

// jsonLines parses every line of out as a slog JSON record and returns
// their messages; a line that is not one fails the test.
func jsonLines(t *testing.T, out string) []string {
	t.Helper()
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line struct{ Time, Level, Msg string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Msg == "" || line.Time == "" || line.Level == "" {
			t.Fatalf("not a JSON log line (%v): %q", err, sc.Text())
		}
		msgs = append(msgs, line.Level+" "+line.Msg)
	}
	return msgs
}

// TestGatewayLogFormat: `herdbridge gateway` with HERDBRIDGE_LOG_FORMAT=json
// writes nothing to stderr but JSON records (the startup banner too is
// one: "gateway serving"); --log-level error keeps the info lines out; an
// unknown format or level is refused saying what to use.
func TestGatewayLogFormat(t *testing.T) {
	t.Setenv("HERDBRIDGE_LOG_FORMAT", "json")
	msgs := jsonLines(t, runGateway(t))
	if !slices.Contains(msgs, "INFO gateway serving") {
		t.Errorf("no \"gateway serving\" record: %q", msgs)
	}
	for _, m := range jsonLines(t, runGateway(t, "--log-level", "error")) {
		if !strings.HasPrefix(m, "ERROR ") {
			t.Errorf("--log-level error logged %q", m)
		}
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		_, _, err := cli(append([]string{"gateway", "--state-dir", gatewaytest.TempDir(t)}, bad...)...)
		if err == nil || !strings.Contains(err.Error(), bad[0]) || !strings.Contains(err.Error(), "use ") {
			t.Errorf("%v: %v, want an error naming the flag and what to use", bad, err)
		}
	}
}
