package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

const (
	rssHeld        = 10000 // replies sent to the primary and left undrained
	rssBodyBytes   = 1024  // body of each reply
	rssConcurrency = 32    // concurrent bridge_send calls while filling
)

// BenchmarkGatewayRSS10kHeld measures the resident memory of a real gateway
// process (the built binary, default flags) idle, and after a worker sent
// 10k 1 KiB replies to a primary that never drains them. The core moves
// them from the inbox (transport.db) into its state file and keeps a head
// per message in memory; bbolt maps both files into memory, so touched
// pages of them count in VmRSS as RssFile.
//
// One measurement per benchmark run whatever b.N is: it runs in the first
// b.Loop iteration, the others are empty (ns/op is suppressed). With
// -benchmem its B/op and allocs/op are this test process's (the MCP client
// sending), not the gateway's.
func BenchmarkGatewayRSS10kHeld(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc/PID/status (Linux)")
	}
	bin := buildHerdbridge(b)
	dir := gatewaytest.TempDir(b)
	pid := startGatewayProcess(b, bin, dir)

	var leadTok, wTok, url string
	for _, r := range []struct {
		name, role string
		tok        *string
	}{{"lead", "primary", &leadTok}, {"w", "worker", &wTok}} {
		out, err := exec.Command(bin, "register", "--name", r.name, "--role", r.role, "--state-dir", dir).Output()
		if err != nil {
			b.Fatalf("herdbridge register %s: %v", r.name, err)
		}
		var reg struct{ Token, URL string }
		if err := json.Unmarshal(out, &reg); err != nil || reg.Token == "" {
			b.Fatalf("herdbridge register %s printed %q (%v)", r.name, out, err)
		}
		*r.tok, url = reg.Token, reg.URL
	}
	_ = leadTok // the primary is registered, never connected: nothing drains

	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * rssConcurrency, MaxIdleConnsPerHost: 2 * rssConcurrency}}
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + wTok}), transport.WithHTTPBasicClient(hc))
	if err != nil {
		b.Fatal(err)
	}
	w := gatewaytest.NewConn(b, "w", c)
	b.Cleanup(hc.CloseIdleConnections)

	time.Sleep(500 * time.Millisecond) // let start-up garbage settle
	idle := rssProcStatus(b, pid)

	body := strings.Repeat("reply body ", rssBodyBytes/11+1)[:rssBodyBytes]
	var fillDur time.Duration
	var held procMem
	first := true
	for b.Loop() {
		if !first {
			continue
		}
		first = false
		start := time.Now()
		rssFill(b, w, body)
		fillDur = time.Since(start)
		rssWaitHeld(b, dir, "lead", rssHeld)
		held = rssProcStatus(b, pid)
	}
	st, err := os.Stat(filepath.Join(dir, "transport.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(idle.rss, "idle-RSS-MiB")
	b.ReportMetric(held.rss, "held10k-RSS-MiB")
	b.ReportMetric(held.rss/idle.rss, "RSS-ratio")
	b.ReportMetric(held.anon, "held10k-RssAnon-MiB")
	b.ReportMetric(held.hwm, "peak-RSS-MiB")
	b.ReportMetric(float64(st.Size())/(1<<20), "store-MiB")
	b.ReportMetric(fillDur.Seconds(), "send10k-s")
	if testing.Verbose() {
		b.Logf("idle: %+v; after %d held: %+v; store %.1f MiB; %d sends in %v", idle, rssHeld, held, float64(st.Size())/(1<<20), rssHeld, fillDur)
	}
}

// rssFill sends rssHeld replies from w to lead, rssConcurrency at a time.
func rssFill(b *testing.B, w *gatewaytest.Conn, body string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, rssConcurrency)
	for range rssConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= rssHeld {
				req := mcpgo.CallToolRequest{}
				req.Params.Name = "bridge_send"
				req.Params.Arguments = map[string]any{"target": "lead", "message": body}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res, err := w.Client.CallTool(ctx, req)
				cancel()
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %+v", res.Content)
				}
				if err == nil {
					if s, _ := gatewaytest.RawStatus(res); s != "confirmed" {
						err = fmt.Errorf("status %q", s)
					}
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

// rssWaitHeld waits until the gateway's roster says name holds n messages.
func rssWaitHeld(b *testing.B, dir, name string, n int) {
	deadline := time.Now().Add(30 * time.Second)
	got := -1
	for time.Now().Before(deadline) {
		c, _, r, err := gateway.Dial(dir, gateway.Request{Op: "roster"})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
		for _, e := range r.Roster.Entities {
			if e.Name == name {
				got = e.Held
			}
		}
		if got == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s holds %d, want %d", name, got, n)
}

// buildHerdbridge builds this command into b's temp dir.
func buildHerdbridge(b *testing.B) string {
	b.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(b.TempDir(), "herdbridge")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startGatewayProcess runs `herdbridge gateway` on dir and waits until it
// serves; it is stopped with SIGTERM at cleanup.
func startGatewayProcess(b *testing.B, bin, dir string) int {
	b.Helper()
	logf, err := os.Create(filepath.Join(b.TempDir(), "gateway.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "gateway", "--listen", "127.0.0.1:0", "--state-dir", dir, "--host-id", "rss")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, gateway.InfoName))
		var info gateway.Info
		if err == nil && json.Unmarshal(raw, &info) == nil && info.PID == cmd.Process.Pid {
			return info.PID
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logf.Name())
			b.Fatalf("gateway exited: %v\n%s", err, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatal("gateway did not write gateway.json in 15s")
		}
	}
}

// procMem is what /proc/PID/status says, in MiB.
type procMem struct{ rss, hwm, anon, file float64 }

func rssProcStatus(b *testing.B, pid int) procMem {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var m procMem
	fields := map[string]*float64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm, "RssAnon:": &m.anon, "RssFile:": &m.file}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text()) // "VmRSS:   12345 kB"
		if len(parts) == 3 && parts[2] == "kB" {
			if p := fields[parts[0]]; p != nil {
				kb, err := strconv.ParseFloat(parts[1], 64)
				if err != nil {
					b.Fatal(err)
				}
				*p = kb / 1024
			}
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	if m.rss == 0 {
		b.Fatal(errors.New("no VmRSS in /proc status"))
	}
	return m
}
