package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

const (
	drainHeld      = 500       // messages in the backlog
	drainBodyBytes = 256 << 10 // each one's body: the largest a tool accepts
	drainStalled   = 8         // connections that POST a poll and read nothing
)

// BenchmarkGatewayRSSBigDrain measures a real gateway process (the built
// binary, default flags) draining a 125 MiB backlog (500 held 256 KiB
// replies, all in the store) over streamable HTTP:
//
//   - drain: one ordinary client polls bridge_poll(max 500) to the end;
//   - stalled: the backlog again, then 8 connections of the same entity
//     each POST bridge_poll(max 500) with a 4 KiB receive buffer and read
//     nothing, and one ordinary client drains what it can; once the
//     gateway is quiet (the stalled results built, their writes blocked)
//     the stalled ones close and the client drains the rest.
//
// Each phase reports the gateway's peak RSS within it (VmHWM, reset
// through /proc/PID/clear_refs before it) and, sampled every 20 ms, the
// RssAnon (heap, stacks) and RssFile (bbolt's maps of state.db and
// transport.db) at the highest sample; the counts say how many distinct
// messages the client got. One measurement per run whatever b.N is.
//
//	go test -run '^$' -bench GatewayRSSBigDrain -benchtime 1x -v ./cmd/herdbridge/
func BenchmarkGatewayRSSBigDrain(b *testing.B) {
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		b.Skip("needs /proc/PID/clear_refs (Linux)")
	}
	bin := buildHerdbridge(b)
	dir := gatewaytest.TempDir(b)
	pid := startGatewayProcess(b, bin, dir)
	leadTok, url := registerBin(b, bin, dir, "lead", "primary")
	wTok, _ := registerBin(b, bin, dir, "w", "worker")
	w := gatewaytest.TokenConn(b, strings.TrimSuffix(url, "/mcp"), "w", wTok)
	lead := gatewaytest.TokenConn(b, strings.TrimSuffix(url, "/mcp"), "lead", leadTok)
	time.Sleep(500 * time.Millisecond) // let start-up garbage settle
	idle := rssProcStatus(b, pid)

	first := true
	for b.Loop() {
		if !first {
			continue
		}
		first = false
		fillBig(b, w, "a")
		rssWaitHeld(b, dir, "lead", drainHeld)
		time.Sleep(releaseSettle)
		held := rssProcStatus(b, pid)
		m := watchPeak(b, pid)
		start := time.Now()
		got, calls := drainAll(b, lead)
		drain := m.stop()
		if len(got) != drainHeld {
			b.Errorf("drain: %d distinct messages of %d", len(got), drainHeld)
		}
		b.Logf("idle %+v; %d held %+v; drain: %d messages in %d calls, %v, peak %+v", idle, drainHeld, held, len(got), calls, time.Since(start).Round(time.Millisecond), drain)
		b.ReportMetric(idle.rss, "idle-RSS-MiB")
		b.ReportMetric(held.rss, "held-RSS-MiB")
		b.ReportMetric(drain.hwm, "drain-peak-RSS-MiB")
		b.ReportMetric(drain.anon, "drain-peak-RssAnon-MiB")
		b.ReportMetric(drain.file, "drain-peak-RssFile-MiB")
		b.ReportMetric(float64(calls), "drain-calls")

		fillBig(b, w, "b")
		rssWaitHeld(b, dir, "lead", drainHeld)
		time.Sleep(releaseSettle)
		m = watchPeak(b, pid)
		stalled := stallReaders(b, url, leadTok, drainStalled)
		waitClaimed(b, dir)
		got, _ = drainAll(b, lead)
		during := len(got)
		waitQuiet(b, pid) // the stalled readers' results are built and blocked in their writes
		for _, c := range stalled {
			c.Close()
		}
		rest := waitRest(b, lead, got)
		peak := m.stop()
		b.Logf("stalled: %d readers; the client drained %d while they stalled, %d after they closed (%d distinct of %d); peak %+v",
			drainStalled, during, rest-during, rest, drainHeld, peak)
		b.ReportMetric(peak.hwm, "stalled-peak-RSS-MiB")
		b.ReportMetric(peak.anon, "stalled-peak-RssAnon-MiB")
		b.ReportMetric(peak.file, "stalled-peak-RssFile-MiB")
		b.ReportMetric(float64(during), "stalled-drained")
		b.ReportMetric(float64(rest), "stalled-drained-in-all")
	}
	b.ReportMetric(0, "ns/op")
}

// registerBin registers name with the built binary: its token and the
// gateway's MCP URL.
func registerBin(b *testing.B, bin, dir, name, role string) (tok, url string) {
	b.Helper()
	out, err := exec.Command(bin, "register", "--name", name, "--role", role, "--state-dir", dir).Output()
	if err != nil {
		b.Fatalf("herdbridge register %s: %v", name, err)
	}
	var reg struct{ Token, URL string }
	if err := json.Unmarshal(out, &reg); err != nil || reg.Token == "" {
		b.Fatalf("herdbridge register %s printed %q (%v)", name, out, err)
	}
	return reg.Token, reg.URL
}

// fillBig has w send drainHeld replies of drainBodyBytes to lead, each
// starting with its tag "<round>-<i> ".
func fillBig(b *testing.B, w *gatewaytest.Conn, round string) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < drainHeld; i = next.Add(1) - 1 {
				tag := fmt.Sprintf("%s-%d ", round, i)
				body := tag + strings.Repeat("x", drainBodyBytes-len(tag))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				r, err := w.CallCtx(ctx, "bridge_send", map[string]any{"target": "lead", "message": body})
				cancel()
				if err == nil && (r.IsError || r.Status != "confirmed") {
					err = fmt.Errorf("status %q: %s", r.Status, r.Text)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("bridge_send: %v", err)
	}
}

// drainAll polls lead until a poll finds nothing: the distinct tags it got
// and the calls it took.
func drainAll(b *testing.B, lead *gatewaytest.Conn) (map[string]bool, int) {
	b.Helper()
	got := map[string]bool{}
	for calls := 1; ; calls++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		r, err := lead.CallCtx(ctx, "bridge_poll", map[string]any{"max": drainHeld})
		cancel()
		if err != nil || r.IsError {
			b.Fatalf("bridge_poll: %v %s", err, r.Text)
		}
		for _, m := range r.Messages {
			got[strings.Fields(m.Body)[0]] = true
		}
		if len(r.Messages) == 0 {
			return got, calls
		}
	}
}

// waitRest drains after the stalled readers closed, until every message of
// the round came or a minute passed: how many distinct ones came in all.
func waitRest(b *testing.B, lead *gatewaytest.Conn, got map[string]bool) int {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(got) < drainHeld && time.Now().Before(deadline) {
		more, _ := drainAll(b, lead)
		for k := range more {
			got[k] = true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return len(got)
}

// waitClaimed waits until the stalled readers' polls have taken their
// messages: lead's held count stops falling for a second (a minute at most).
func waitClaimed(b *testing.B, dir string) {
	b.Helper()
	last, since := -1, time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := rosterHeld(b, dir, "lead")
		if n != last {
			last, since = n, time.Now()
		}
		if n < drainHeld && time.Since(since) > time.Second {
			return
		}
	}
	b.Logf("the stalled polls took nothing in a minute (held %d)", last)
}

// stallReaders opens n MCP sessions of the entity with token, each with a
// 4 KiB receive buffer, and on each POSTs bridge_poll(max 500) without
// reading the answer.
func stallReaders(b *testing.B, url, token string, n int) []net.Conn {
	b.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		b.Fatal(err)
	}
	var conns []net.Conn
	for i := range n {
		sid := initSession(b, url, token)
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			if err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("tcp", u.Host)
		if err != nil {
			b.Fatal(err)
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bridge_poll","arguments":{"max":%d}}}`, 100+i, drainHeld)
		req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", u.Path, u.Host, token, sid, len(body), body)
		if _, err := io.WriteString(c, req); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}

// initSession initializes an MCP session over plain HTTP: its id.
func initSession(b *testing.B, url, token string) string {
	b.Helper()
	post := func(sid, body string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		return http.DefaultClient.Do(req)
	}
	res, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}`)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %s, session %q", res.Status, sid)
	}
	if res, err = post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return sid
}

// rosterHeld is how many messages the gateway's roster says name holds.
func rosterHeld(b *testing.B, dir, name string) int {
	b.Helper()
	c, _, r, err := gateway.Dial(dir, gateway.Request{Op: "roster"})
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	for _, e := range r.Roster.Entities {
		if e.Name == name {
			return e.Held
		}
	}
	return -1
}

// peakWatch samples a process's memory until stopped.
type peakWatch struct {
	stopc chan struct{}
	done  chan procMem
}

// watchPeak resets pid's peak RSS and samples its memory every 20 ms: stop
// returns VmHWM since the reset, with the anon/file split of the highest
// sample.
func watchPeak(b *testing.B, pid int) *peakWatch {
	b.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS: %v", err)
	}
	w := &peakWatch{stopc: make(chan struct{}), done: make(chan procMem, 1)}
	go func() {
		var top procMem
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			m, err := readProcMem(pid)
			if err == nil && m.rss > top.rss {
				top = m
			}
			select {
			case <-w.stopc:
				if err == nil {
					top.hwm = m.hwm
				}
				w.done <- top
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *peakWatch) stop() procMem {
	close(w.stopc)
	return <-w.done
}

// readProcMem is rssProcStatus without a testing.B (for the sampler).
func readProcMem(pid int) (procMem, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	var m procMem
	fields := map[string]*float64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm, "RssAnon:": &m.anon, "RssFile:": &m.file}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) == 3 && parts[2] == "kB" {
			if p := fields[parts[0]]; p != nil {
				var kb float64
				fmt.Sscan(parts[1], &kb)
				*p = kb / 1024
			}
		}
	}
	return m, nil
}

// waitQuiet waits until pid used under 50 ms of CPU in a second (three
// minutes at most).
func waitQuiet(b *testing.B, pid int) {
	b.Helper()
	last := cpuTicks(b, pid)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		now := cpuTicks(b, pid)
		if now-last < 5 { // clock ticks of 10 ms
			return
		}
		last = now
	}
	b.Logf("the gateway was still busy after three minutes")
}

// cpuTicks is pid's user+system CPU time in clock ticks (/proc/PID/stat).
func cpuTicks(b *testing.B, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:])) // after the command name
	var u, s int64
	fmt.Sscan(f[11], &u) // field 14, utime
	fmt.Sscan(f[12], &s) // field 15, stime
	return u + s
}
