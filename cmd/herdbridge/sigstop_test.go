package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// sigstopRun is one run of the SIGSTOP scenario (issue 20, "SIGSTOP 60 s
// under load: 0 lost"; its row "a cancelled stdio poll").
type sigstopRun struct {
	stall        time.Duration // how long the gateway process is stopped
	stops        int           // how many times (rn.around apart)
	lease        time.Duration // the gateway's deliveryLease
	around       time.Duration // load before the stop, and again after it
	stdioSenders int
	httpSenders  int
}

const (
	sigstopWorker = "wk"
	// the worker's clients give up on a poll after pollTimeout (mcp-go
	// then sends notifications/cancelled over stdio; over HTTP it ends
	// the request): a poll open when the gateway stops is cancelled
	sigstopPollWait    = 1
	sigstopPollTimeout = 3 * time.Second
	sigstopSendPace    = 40 * time.Millisecond
)

// TestSigstopUnderLoad: the short variant, in the normal suite.
func TestSigstopUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and stops a real gateway process")
	}
	runSigstop(t, sigstopRun{stall: 4 * time.Second, stops: 2, lease: envDuration(t, "HB_SIGSTOP_LEASE", 15*time.Second),
		around: 2 * time.Second, stdioSenders: 2, httpSenders: 2})
}

// TestSigstopUnderLoadLong is the measurement: the gateway stopped
// 60 s (HB_SIGSTOP_STALL) under load. HB_SIGSTOP=1 runs it;
// HB_SIGSTOP_BIN runs another herdbridge binary (a baseline build).
func TestSigstopUnderLoadLong(t *testing.T) {
	if os.Getenv("HB_SIGSTOP") != "1" {
		t.Skip("HB_SIGSTOP=1 runs the gateway stopped for 60 s (HB_SIGSTOP_STALL, HB_SIGSTOP_LEASE)")
	}
	runSigstop(t, sigstopRun{stall: envDuration(t, "HB_SIGSTOP_STALL", 60*time.Second), stops: 1,
		lease: envDuration(t, "HB_SIGSTOP_LEASE", 20*time.Second), around: 8 * time.Second, stdioSenders: 3, httpSenders: 3})
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// runSigstop: a real gateway process; senders over stdio (`herdbridge
// mcp` processes) and streamable HTTP send uniquely tagged briefs to a
// pull worker whose three clients (two over HTTP, one over stdio) drain
// with bridge_poll and give up on a poll after 3 s; the gateway is
// SIGSTOPped for rn.stall, rn.stops times, then continued; once the
// senders stop everything is drained and every tag is counted.
func runSigstop(t *testing.T, rn sigstopRun) {
	start := time.Now()
	bin := os.Getenv("HB_SIGSTOP_BIN") // another build, for a baseline
	if bin == "" {
		bin = buildBinary(t)
	}
	dir := gatewaytest.TempDir(t)
	cfg := fmt.Sprintf(`{"deliveryLease": %q}`, rn.lease.String())
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var gwlog testlog.Buffer
	gp := startGatewayProcLog(t, bin, dir, "sigstophost", &gwlog, "--fsync=false", "--log-level", "debug")
	t.Cleanup(func() { _ = gp.cmd.Process.Signal(syscall.SIGCONT) })

	// the HTTP clients register first: a live stdio session then holds the name
	workers := []*gatewaytest.Conn{procConn(t, gp, sigstopWorker, "worker"), procConn(t, gp, sigstopWorker, "worker")}
	workers = append(workers, stdioProcConn(t, bin, dir, sigstopWorker, "worker"))
	var senders []*gatewaytest.Conn
	for i := range rn.stdioSenders {
		senders = append(senders, stdioProcConn(t, bin, dir, fmt.Sprintf("ps%d", i), "primary"))
	}
	for i := range rn.httpSenders {
		senders = append(senders, procConn(t, gp, fmt.Sprintf("ph%d", i), "primary"))
	}

	l := newTagLedger()
	stopSend, stopDrain := make(chan struct{}), make(chan struct{})
	var sendWG, drainWG sync.WaitGroup
	for _, s := range senders {
		sendWG.Add(1)
		go func() { defer sendWG.Done(); sendLoop(l, s, rn.stall+time.Minute, stopSend) }()
	}
	for _, w := range workers {
		drainWG.Add(1)
		go func() { defer drainWG.Done(); drainLoop(l, w, stopDrain) }()
	}

	for range rn.stops {
		time.Sleep(rn.around)
		stopFor(t, gp, rn.stall)
	}
	time.Sleep(rn.around)
	close(stopSend)
	sendWG.Wait()
	close(stopDrain)
	drainWG.Wait()

	finalDrain(t, l, workers, senders, rn.lease+time.Minute)
	checkSigstop(t, l, rn, time.Since(start))
	logReturns(t, gwlog.String())
	if t.Failed() {
		keepLog(t, gwlog.String())
	}
}

// keepLog writes the gateway's log where a failed run can be read.
func keepLog(t *testing.T, log string) {
	f, err := os.CreateTemp("", "sigstop-gateway-*.log")
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(log)
	t.Logf("the gateway's log: %s", f.Name())
}

// returnedLine is the gateway's debug line for messages a call handed
// over that went back to held (bridge.Core.returnHanded).
var returnedLine = regexp.MustCompile(`msg="handed-over messages back to held" .*messages=(\d+) seen=(true|false)`)

// logReturns says how often results went unconfirmed — unseen (a
// cancelled stdio poll the relay held back, a response never written) or
// seen (flagged redelivered) — so a run shows the paths it exercised, and
// passes on the gateway's warnings and errors.
func logReturns(t *testing.T, log string) {
	t.Helper()
	calls, msgs := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if m := returnedLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			calls[m[2]]++
			msgs[m[2]] += n
		} else if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Logf("gateway: %s", line)
		}
	}
	t.Logf("results back to held: unseen %d calls (%d messages), seen %d calls (%d messages)",
		calls["false"], msgs["false"], calls["true"], msgs["true"])
}

// stdioProcConn starts `herdbridge mcp` as an agent's MCP client does,
// outside herdr (HERDR_* and HERDBRIDGE_* taken out of its environment),
// and connects mcp-go's stdio client to it.
func stdioProcConn(t *testing.T, bin, dir, name, role string) *gatewaytest.Conn {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERDR_") && !strings.HasPrefix(kv, "HERDBRIDGE_") {
			env = append(env, kv)
		}
	}
	args := []string{"mcp", "--name", name, "--role", role, "--state-dir", dir, "--no-start"}
	tr := transport.NewStdioWithOptions(bin, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = env
			return cmd, nil
		}),
		transport.WithCommandStderrWriter(os.Stderr))
	return gatewaytest.NewConn(t, name, client.NewClient(tr))
}

// stopFor stops the gateway process for d, then continues it.
func stopFor(t *testing.T, gp *gatewayProc, d time.Duration) {
	t.Helper()
	if err := gp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	if err := gp.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// sendLoop sends tagged briefs to the worker until stop; each send may
// wait out the stop (timeout), so it ends with the answer the gateway gave.
func sendLoop(l *tagLedger, s *gatewaytest.Conn, timeout time.Duration, stop <-chan struct{}) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-time.After(sigstopSendPace):
		}
		tag := fmt.Sprintf("sigstop %s %05d", s.Name, seq)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r, err := s.CallCtx(ctx, "bridge_send", map[string]any{"target": sigstopWorker, "message": tag})
		cancel()
		l.noteSend(tag, r, err)
	}
}

// drainLoop polls as an impatient client does: a poll not answered
// within sigstopPollTimeout is given up (and, over stdio, cancelled).
func drainLoop(l *tagLedger, w *gatewaytest.Conn, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), sigstopPollTimeout)
		r, err := w.CallCtx(ctx, "bridge_poll", map[string]any{"max": 50, "wait_s": sigstopPollWait})
		cancel()
		switch {
		case err != nil:
			l.notePoll("gaveUp", nil)
		case r.IsError:
			l.notePoll("error", nil)
			time.Sleep(100 * time.Millisecond)
		default:
			l.notePoll(r.Status, r.Messages)
		}
	}
}

// finalDrain polls the worker's clients and the senders' inboxes (for
// FAILED) with patient calls until every confirmed tag has a fate and
// nothing is held or leased, or within bound (a lease out at the end runs
// out first).
func finalDrain(t *testing.T, l *tagLedger, workers, senders []*gatewaytest.Conn, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for _, w := range workers {
			r := w.Call("bridge_poll", map[string]any{"max": 200, "wait_s": 1})
			if !r.IsError {
				l.notePoll("final-"+r.Status, r.Messages)
			}
		}
		for _, s := range senders {
			if r := s.Call("bridge_poll", map[string]any{"max": 200}); !r.IsError {
				l.noteNotices(r.Messages)
			}
		}
		if len(l.open()) == 0 && settled(workers[0]) {
			return
		}
	}
	t.Logf("final drain: %d confirmed tags without a fate after %v", len(l.open()), bound)
}

// settled reports whether the worker holds nothing and has nothing leased.
func settled(w *gatewaytest.Conn) bool {
	r := w.Call("bridge_poll", map[string]any{"peek": true})
	return !r.IsError && (r.Held == nil || (r.Held.Total == 0 && r.Held.InFlight == 0))
}

func checkSigstop(t *testing.T, l *tagLedger, rn sigstopRun, wall time.Duration) {
	t.Helper()
	tl := l.tally()
	t.Logf("SIGSTOP %d × %v (lease %v, %d stdio + %d HTTP senders): %v; wall %v", rn.stops, rn.stall, rn.lease,
		rn.stdioSenders, rn.httpSenders, tl, wall.Round(time.Second))
	if u := l.unknowns(5); len(u) > 0 {
		t.Logf("sends with no outcome (not confirmed; a client calls them again): %q", u)
	}
	if open := l.open(); len(open) > 0 {
		var ids []string
		for _, tag := range open[:min(5, len(open))] {
			ids = append(ids, tag+" = "+l.msgID(tag))
		}
		t.Errorf("lost: %d confirmed tags neither delivered nor FAILED, e.g. %q", len(open), ids)
	}
	if tl.unflagged > 0 {
		t.Errorf("%d duplicates came without redelivered", tl.unflagged)
	}
	if tl.both > 0 {
		t.Errorf("%d tags both delivered and reported FAILED", tl.both)
	}
	if tl.strays > 0 {
		t.Errorf("%d delivered bodies no send of this run carried", tl.strays)
	}
	if tl.accepted == 0 {
		t.Error("no send was confirmed")
	}
}
