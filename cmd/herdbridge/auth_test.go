package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// authPost sends one MCP request to /mcp with token (none if empty) and
// returns the status.
func authPost(t *testing.T, hc *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// tokenConn is a streamable HTTP MCP client with the given token.
func tokenConn(t *testing.T, url, name, token string, opts ...transport.StreamableHTTPCOption) *conn {
	t.Helper()
	opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	c, err := client.NewStreamableHttpClient(url+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	cn := &conn{t: t, name: name, c: c}
	cn.init(context.Background())
	return cn
}

// rosterOK calls bridge_roster, which every connected entity may.
func rosterOK(cn *conn) {
	cn.t.Helper()
	if r := cn.call("bridge_roster", map[string]any{}); r.IsError {
		cn.t.Fatalf("%s: bridge_roster: %s", cn.name, r.Text)
	}
}

func runCLI(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), err
}

// TestAuthOtherEntityToken: a token acts as the entity it was issued to and
// no other: with b's token nothing held for a can be drained, and what b
// sends comes from b. (No token → 401 is TestHTTPAuth; another entity's
// token on a session → 403 is TestSessionBelongsToItsEntity.)
func TestAuthOtherEntityToken(t *testing.T) {
	g := startGateway(t, "")
	a := httpConn(t, g, "a", "primary")
	b := httpConn(t, g, "b", "primary")
	w := stdioConn(t, g, "w", "worker")
	w.mustStatus("bridge_send", map[string]any{"target": "a", "message": "for a only"}, "confirmed")
	waitHeld(t, g, "a", 1)
	if r := b.call("bridge_poll", map[string]any{}); len(r.Messages) != 0 {
		t.Fatalf("b drained %+v", r.Messages)
	}
	if r := b.call("bridge_poll", map[string]any{"target": "w"}); len(r.Messages) != 0 {
		t.Fatalf("b drained a's message by naming its sender: %+v", r.Messages)
	}
	b.mustStatus("bridge_send", map[string]any{"target": "a", "message": "from b"}, "confirmed")
	waitHeld(t, g, "a", 2)
	r := a.mustStatus("bridge_poll", map[string]any{}, "drained")
	got := map[string]string{}
	for _, m := range r.Messages {
		got[m.Body] = m.FromName
	}
	if got["for a only"] != "w" || got["from b"] != "b" {
		t.Fatalf("a drained %+v", r.Messages)
	}
}

func waitHeld(t *testing.T, g *Gateway, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, e := range g.BridgeCore().Roster().Entities {
			if e.Name == name && e.Held >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d message(s)", name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuthRevoke: `register --revoke` makes every token of the entity fail
// at once — a new request, the next request of an open streamable HTTP or
// SSE session, a long poll already running — and after a restart; the
// entity keeps its inbox, its socket sessions go on, and registering again
// gives a token that works.
func TestAuthRevoke(t *testing.T) {
	dir := shortTempDir(t)
	g := startGateway(t, dir)
	_, tok1 := register(t, g, "lead", "primary")
	_, tok2 := register(t, g, "lead", "primary")
	_, other := register(t, g, "other", "primary")
	h := tokenConn(t, g.URL(), "lead-http", tok1)
	sc, err := client.NewSSEMCPClient(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok2}))
	if err != nil {
		t.Fatal(err)
	}
	s := &conn{t: t, name: "lead-sse", c: sc}
	s.init(context.Background())
	sock := stdioConn(t, g, "lead", "primary")
	for _, cn := range []*conn{h, s, sock} {
		rosterOK(cn)
	}

	polled := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = h.callCtx(ctx, "bridge_poll", map[string]any{"wait_s": 8})
		polled <- time.Since(start)
	}()
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	select {
	case d := <-polled:
		t.Fatalf("the long poll ended after %v, before the revoke", d)
	default:
	}

	out, err := runCLI("register", "--revoke", "--name", "lead", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "revoked 2 token(s) of lead; register again to get a new one\n"; out != want {
		t.Fatalf("revoke printed %q, want %q", out, want)
	}
	select {
	case d := <-polled:
		t.Logf("the running long poll ended %v after it started", d)
	case <-time.After(4 * time.Second):
		t.Fatal("a long poll opened with the revoked token still runs")
	}
	for _, tok := range []string{tok1, tok2} {
		if st := authPost(t, http.DefaultClient, g.URL(), tok); st != http.StatusUnauthorized {
			t.Fatalf("revoked token: status %d, want 401", st)
		}
	}
	if st := authPost(t, http.DefaultClient, g.URL(), other); st != http.StatusOK {
		t.Fatalf("another entity's token: status %d after revoking lead's", st)
	}
	for _, cn := range []*conn{h, s} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cn.callCtx(ctx, "bridge_roster", map[string]any{})
		cancel()
		if err == nil {
			t.Fatalf("%s: the open session still works with its revoked token", cn.name)
		}
		t.Logf("%s after revoke: %v", cn.name, err)
	}
	rosterOK(sock) // authenticated by the socket, not a token

	w := stdioConn(t, g, "w", "worker")
	w.mustStatus("bridge_send", map[string]any{"target": "lead", "message": "kept"}, "confirmed")
	waitHeld(t, g, "lead", 1)
	g.Close()

	g2 := startGateway(t, dir)
	for _, tok := range []string{tok1, tok2} {
		if st := authPost(t, http.DefaultClient, g2.URL(), tok); st != http.StatusUnauthorized {
			t.Fatalf("revoked token after a restart: status %d, want 401", st)
		}
	}
	if st := authPost(t, http.DefaultClient, g2.URL(), other); st != http.StatusOK {
		t.Fatalf("another entity's token after a restart: status %d", st)
	}
	_, tok3 := register(t, g2, "lead", "primary")
	r := tokenConn(t, g2.URL(), "lead-new", tok3).mustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained")
	if len(r.Messages) != 1 || r.Messages[0].Body != "kept" {
		t.Fatalf("after re-registering: %+v", r.Messages)
	}
}

// TestAuthRevokeWithoutGateway: with no gateway running, --revoke writes the
// state file, and the next gateway refuses the tokens.
func TestAuthRevokeWithoutGateway(t *testing.T) {
	dir := shortTempDir(t)
	g := startGateway(t, dir)
	_, tok := register(t, g, "lead", "primary")
	_, keep := register(t, g, "keep", "primary")
	g.Close()
	out, err := runCLI("register", "--revoke", "--name", "lead", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "revoked 1 token(s) of lead;") {
		t.Fatalf("printed %q", out)
	}
	g2 := startGateway(t, dir)
	if st := authPost(t, http.DefaultClient, g2.URL(), tok); st != http.StatusUnauthorized {
		t.Fatalf("token revoked offline: status %d, want 401", st)
	}
	if st := authPost(t, http.DefaultClient, g2.URL(), keep); st != http.StatusOK {
		t.Fatalf("the other entity's token: status %d", st)
	}
}

func TestAuthRevokeErrors(t *testing.T) {
	dir := shortTempDir(t)
	g := startGateway(t, dir)
	register(t, g, "lead", "primary")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"register", "--revoke", "--name", "nobody", "--state-dir", dir}, `no entity named "nobody"`},
		{[]string{"register", "--revoke", "--name", "lead@elsewhere", "--state-dir", dir}, `on host "elsewhere"`},
		{[]string{"register", "--revoke", "--state-dir", dir}, "needs --name"},
		{[]string{"register", "--revoke", "--name", "lead", "--role", "primary", "--state-dir", dir}, "takes only --name"},
	} {
		if _, err := runCLI(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
	g.Close()
	if _, err := runCLI("register", "--revoke", "--name", "nobody", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), `no entity named "nobody"`) {
		t.Errorf("offline, unknown name: %v", err)
	}
	empty := shortTempDir(t)
	if _, err := runCLI("register", "--revoke", "--name", "lead", "--state-dir", empty); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("offline, no state: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, stateName)); err == nil {
		t.Error("revoking on an empty state dir created a state file")
	}
}

// lockedBuffer is a log sink tests can read while the gateway writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// socketProbe is what the helper process saw on the socket.
type socketProbe struct {
	DialErr string `json:"dialErr,omitempty"`
	EACCES  bool   `json:"eacces,omitempty"`
	Reply   string `json:"reply,omitempty"`
	UID     int    `json:"uid"`
}

// TestAuthHelperProcess is not a test: TestAuthSocketOtherUID runs the test
// binary as another user with HB_AUTH_PROBE_SOCK set, and this connects to
// that socket and reports what happened.
func TestAuthHelperProcess(t *testing.T) {
	path := os.Getenv("HB_AUTH_PROBE_SOCK")
	if path == "" {
		t.Skip("helper process for TestAuthSocketOtherUID")
	}
	p := socketProbe{UID: os.Geteuid()}
	c, err := net.DialTimeout("unix", path, 3*time.Second)
	if err != nil {
		p.DialErr, p.EACCES = err.Error(), errors.Is(err, syscall.EACCES)
	} else {
		_, _ = c.Write([]byte(`{"op":"roster"}` + "\n"))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		p.Reply = line
		if err != nil {
			p.Reply += " (" + err.Error() + ")"
		}
		c.Close()
	}
	raw, _ := json.Marshal(p)
	fmt.Printf("HBPROBE %s\n", raw)
}

// TestAuthSocketOtherUID: another user cannot use the gateway's socket:
// refused by the file modes (EACCES), and, with the socket made 0666 on
// purpose, by the gateway's peer uid check (one error line, one warning).
func TestAuthSocketOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as uid 65534 (CI runs the tests as root, so this runs there)")
	}
	// the test binary, copied where uid 65534 may run it (go test's own
	// build dir is 0700)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir := shortTempDir(t)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "probe.test")
	copyFile(t, self, bin, 0o755)

	dir := shortTempDir(t)
	logs := &lockedBuffer{}
	g := &Gateway{StateDir: dir, Listen: "127.0.0.1:0", Host: "testhost",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	g.Config.Herdr.Disabled = true
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })

	probe := func() socketProbe {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^TestAuthHelperProcess$")
		cmd.Env = append(os.Environ(), "HB_AUTH_PROBE_SOCK="+g.SocketPath())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe as uid 65534: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if raw, ok := strings.CutPrefix(line, "HBPROBE "); ok {
				var p socketProbe
				if err := json.Unmarshal([]byte(raw), &p); err != nil {
					t.Fatal(err)
				}
				if p.UID != 65534 {
					t.Fatalf("probe ran as uid %d", p.UID)
				}
				return p
			}
		}
		t.Fatalf("probe printed no result:\n%s", out)
		return socketProbe{}
	}

	// 1. as created: the socket is 0600 in the 0700 state dir
	if p := probe(); !p.EACCES {
		t.Fatalf("0700 state dir: %+v, want EACCES", p)
	}
	// 2. the state dir opened up: the socket's own 0600 still refuses
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if p := probe(); !p.EACCES {
		t.Fatalf("0600 socket in a 0755 dir: %+v, want EACCES", p)
	}
	// 3. the socket opened up too: the uid check refuses
	if err := os.Chmod(g.SocketPath(), 0o666); err != nil {
		t.Fatal(err)
	}
	p := probe()
	if p.DialErr != "" {
		t.Fatalf("0666 socket: %+v, want the connection to open", p)
	}
	var r sockReply
	if err := json.Unmarshal([]byte(p.Reply), &r); err != nil {
		t.Fatalf("reply %q: %v", p.Reply, err)
	}
	if r.OK || !strings.Contains(r.Error, "serves only uid 0") || !strings.Contains(r.Error, "you are uid 65534") || r.Roster != nil {
		t.Fatalf("reply to another uid: %+v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "peerUid=65534") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning logged:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "socket peer refused") || !strings.Contains(l, "peerPid=") {
		t.Fatalf("log: %s", l)
	}
	// the owner still gets in
	c, _, rr, err := dialGateway(dir, sockRequest{Op: "roster"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if rr.Roster == nil {
		t.Fatal("no roster for the owner")
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// selfSigned writes a self-signed certificate for localhost, the loopback
// addresses and ips, and its key, into dir.
func selfSigned(t *testing.T, dir string, ips ...net.IP) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "herdbridge test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	return certFile, keyFile, pool
}

// nonLoopbackIPv4 is an address of this machine off loopback, if any.
func nonLoopbackIPv4() net.IP {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.To4()
		}
	}
	return nil
}

// TestAuthTLS: with --tls-cert/--tls-key a non-loopback --listen is allowed
// and served over HTTPS, bearer check included; without them the same
// address is refused with a message naming the flags; the flags go together
// and a bad certificate stops the start naming the file.
func TestAuthTLS(t *testing.T) {
	ext := nonLoopbackIPv4()
	var ips []net.IP
	if ext != nil {
		ips = append(ips, ext)
	}
	certDir := shortTempDir(t)
	certFile, keyFile, pool := selfSigned(t, certDir, ips...)

	refused := &Gateway{StateDir: shortTempDir(t), Listen: "0.0.0.0:0", Host: "h"}
	if err := refused.Start(context.Background()); err == nil {
		refused.Close()
		t.Fatal("0.0.0.0 without TLS: started")
	} else if !strings.Contains(err.Error(), "only loopback") || !strings.Contains(err.Error(), "--tls-cert FILE --tls-key FILE") {
		t.Fatalf("0.0.0.0 without TLS: %v", err)
	}

	g := &Gateway{StateDir: shortTempDir(t), Listen: "0.0.0.0:0", Host: "testhost", Logger: testLogger(), TLSCert: certFile, TLSKey: keyFile}
	g.Config.Herdr.Disabled = true
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if !strings.HasPrefix(g.URL(), "https://") {
		t.Fatalf("URL %s", g.URL())
	}
	_, port, _ := net.SplitHostPort(g.Addr)
	_, tok := register(t, g, "lead", "primary")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	hosts := []string{"127.0.0.1"}
	if ext != nil {
		hosts = append(hosts, ext.String())
	}
	for _, host := range hosts {
		base := "https://" + net.JoinHostPort(host, port)
		if st := authPost(t, hc, base, ""); st != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d, want 401", base, st)
		}
		if st := authPost(t, hc, base, tok); st != http.StatusOK {
			t.Fatalf("%s with the token: %d", base, st)
		}
		cn := tokenConn(t, base, "lead@"+host, tok, transport.WithHTTPBasicClient(hc))
		rosterOK(cn)
		t.Logf("MCP over %s: ok", base)
	}
	// plain HTTP on the TLS port gets nowhere near MCP
	if resp, err := http.Post("http://"+net.JoinHostPort("127.0.0.1", port)+"/mcp", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port: %d", resp.StatusCode)
		}
	}
	// a client that does not trust the certificate is refused
	if _, err := http.Post("https://"+net.JoinHostPort("127.0.0.1", port)+"/mcp", "application/json", strings.NewReader("{}")); err == nil {
		t.Fatal("untrusted certificate accepted")
	}

	bad := filepath.Join(certDir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cert, key, want string
	}{
		{certFile, "", "go together"},
		{"", keyFile, "go together"},
		{filepath.Join(certDir, "missing.pem"), keyFile, "missing.pem"},
		{certFile, filepath.Join(certDir, "missing.pem"), "missing.pem"},
		{bad, keyFile, bad},
	} {
		g := &Gateway{StateDir: shortTempDir(t), Listen: "0.0.0.0:0", Host: "h", TLSCert: c.cert, TLSKey: c.key}
		if err := g.Start(context.Background()); err == nil {
			g.Close()
			t.Fatalf("cert %q key %q: started", c.cert, c.key)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("cert %q key %q: %v, want %q", c.cert, c.key, err, c.want)
		}
	}
	// the command-line flags reach the gateway
	if _, err := runCLI("gateway", "--state-dir", shortTempDir(t), "--listen", "0.0.0.0:0", "--tls-cert", certFile); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("gateway --tls-cert alone: %v", err)
	}
}
