package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// openFDs is this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// Idle keep-alive connections are closed after IdleTimeout, and silent
// new ones after ReadHeaderTimeout: a client cannot hold connections
// open by doing nothing.
func TestIdleHTTPConnectionsClosed(t *testing.T) {
	cfg := gatewaytest.LocalConfig(t, gatewaytest.TempDir(t))
	cfg.File.Net.IdleTimeout = gateway.Duration(300 * time.Millisecond)
	cfg.File.Net.ReadHeaderTimeout = gateway.Duration(300 * time.Millisecond)
	g := gatewaytest.Start(t, cfg)

	const n = 100
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			continue // silent: never sends a request
		}
		// one keep-alive request, answered, then idle
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", g.Addr())
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("conn %d: %s, close=%v", i, res.Status, res.Close)
		}
	}
	for i, c := range conns {
		// the server closes it: the read ends (EOF) well before our bound
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("conn %d still open after 15s (IdleTimeout 300ms)", i)
		}
	}
}

// floodEnv names the flood helper's settings: the gateway's HTTP
// address, its admin socket, and how many connections to open.
const floodEnv = "HB_FLOOD"

// TestFloodHelper is not a test: TestConnectionFlood runs the test binary
// with HB_FLOOD set, as another process, to open idle connections (half to
// HTTP, each with one keep-alive request it never reads the answer of,
// half to the admin socket, silent) until its stdin closes.
func TestFloodHelper(t *testing.T) {
	spec := os.Getenv(floodEnv)
	if spec == "" {
		t.Skip("a helper process of TestConnectionFlood")
	}
	parts := strings.Split(spec, "|")
	addr, sock := parts[0], parts[1]
	n, _ := strconv.Atoi(parts[2])
	var conns []net.Conn
	failed := 0
	for i := range n {
		var (
			c   net.Conn
			err error
		)
		if i%2 == 0 {
			c, err = net.DialTimeout("tcp", addr, 2*time.Second)
			if err == nil {
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			}
		} else {
			c, err = net.DialTimeout("unix", sock, 2*time.Second)
		}
		if err != nil {
			failed++
			continue
		}
		conns = append(conns, c)
	}
	fmt.Printf("ready %d %d\n", len(conns), failed)
	_, _ = io.Copy(io.Discard, os.Stdin) // until released
	for _, c := range conns {
		c.Close()
	}
}

// 2,000 idle connections from another process (half HTTP keep-alive, half
// admin socket): the gateway holds no more than its caps allow (its open
// files stay within MaxConns + SocketMaxConnsPerUID + a margin), and once
// the flood is released `register` over the socket works within 2 s, and
// so does HTTP. The flood runs as the same uid as the gateway (no other
// uid is available to tests): the per-uid cap is what bounds its socket
// connections, as it would another user's.
func TestConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 connections")
	}
	n := 2000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		// Go raised the soft limit to the hard one at startup; the helper
		// needs n of them, this process the gateway's caps
		if avail := int(lim.Cur) - 1500; avail < n {
			if avail < 400 {
				t.Skipf("open-file limit %d is too low for a flood", lim.Cur)
			}
			t.Logf("open-file limit %d: flooding with %d connections", lim.Cur, avail)
			n = avail
		}
	}
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	gatewaytest.Register(t, g, "before", "primary")
	base := openFDs(t)

	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d", floodEnv, g.Addr(), filepath.Join(dir, gateway.SocketName), n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			stdin.Close()
			_ = cmd.Wait() // its connections are closed with it
		}
	}
	defer release()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatal("the flood helper never got ready")
	}
	var open, failed int
	if _, err := fmt.Sscanf(line, "ready %d %d", &open, &failed); err != nil {
		t.Fatalf("flood helper said %q", line)
	}
	t.Logf("flood: %d connections open, %d refused or timed out", open, failed)

	// the gateway's share of this process's files, sampled for a while
	// the hard bound: both listeners' caps (a connection over the per-uid
	// cap holds its file until its goroutine refuses it); once settled:
	// HTTP's cap and one uid's share of the socket
	budget := gateway.DefaultMaxConns + gateway.DefaultSocketMaxConns + 64
	steadyBudget := gateway.DefaultMaxConns + gateway.DefaultSocketMaxConnsPerUID + 64
	peak := 0
	for range 20 {
		peak = max(peak, openFDs(t)-base)
		time.Sleep(50 * time.Millisecond)
	}
	// once the gateway has caught up: HTTP at its cap, the socket at the
	// flood's uid's cap (the one connection over it being refused)
	var steady, httpOpen, sockOpen int
	gatewaytest.Eventually(t, 30*time.Second, "the flood's connections settle at the caps", func() bool {
		steady = openFDs(t) - base
		httpOpen, sockOpen = g.OpenConns()
		return steady <= steadyBudget
	})
	peak = max(peak, steady)
	t.Logf("gateway fds during the flood: peak %d, settled %d (HTTP %d, socket %d) over the %d before it; budgets %d and %d",
		peak, steady, httpOpen, sockOpen, base, budget, steadyBudget)
	if peak > budget {
		t.Errorf("the gateway opened %d files during the flood, over its budget of %d", peak, budget)
	}

	releasing := time.Now()
	release()
	start := time.Now() // the flood's process is gone: its connections are closed
	t.Logf("the flood's process took %v to close its connections and exit", start.Sub(releasing).Round(time.Millisecond))
	var (
		regErr error
		tries  int
	)
	for time.Since(start) < 10*time.Second {
		tries++
		if _, regErr = gateway.Ask(dir, gateway.Request{Op: "register", Name: "after", Role: "primary"}); regErr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	if regErr != nil {
		t.Fatalf("register after the flood: %v", regErr)
	}
	t.Logf("register worked %v after the release (%d tries)", took.Round(time.Millisecond), tries)
	if took > 2*time.Second {
		t.Errorf("register took %v after the release, want within 2s", took)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	res, err := hc.Get(g.URL() + "/healthz")
	if err != nil {
		t.Fatalf("HTTP after the flood: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("HTTP after the flood: %s", res.Status)
	}
	gatewaytest.Eventually(t, 15*time.Second, "the gateway closes the flood's connections", func() bool {
		return openFDs(t)-base <= 16
	})
}
