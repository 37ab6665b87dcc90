package gateway_test

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// TestAuthOtherEntityToken: a token acts as the entity it was issued to and
// no other: with b's token nothing held for a can be drained, and what b
// sends comes from b. (No token → 401 is TestHTTPAuth; another entity's
// token on a session → 403 is TestSessionBelongsToItsEntity.)
func TestAuthOtherEntityToken(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	a := gatewaytest.HTTPConn(t, g, "a", "primary")
	b := gatewaytest.HTTPConn(t, g, "b", "primary")
	w := gatewaytest.StdioConn(t, g, "w", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "a", "message": "for a only"}, "confirmed")
	gatewaytest.WaitHeld(t, g, "a", 1)
	if r := b.Call("bridge_poll", map[string]any{}); len(r.Messages) != 0 {
		t.Fatalf("b drained %+v", r.Messages)
	}
	if r := b.Call("bridge_poll", map[string]any{"target": "w"}); len(r.Messages) != 0 {
		t.Fatalf("b drained a's message by naming its sender: %+v", r.Messages)
	}
	b.MustStatus("bridge_send", map[string]any{"target": "a", "message": "from b"}, "confirmed")
	gatewaytest.WaitHeld(t, g, "a", 2)
	r := a.MustStatus("bridge_poll", map[string]any{}, "drained")
	got := map[string]string{}
	for _, m := range r.Messages {
		got[m.Body] = m.FromName
	}
	if got["for a only"] != "w" || got["from b"] != "b" {
		t.Fatalf("a drained %+v", r.Messages)
	}
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
	binDir := gatewaytest.TempDir(t)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "probe.test")
	copyFile(t, self, bin, 0o755)

	dir := gatewaytest.TempDir(t)
	logs := &testlog.Buffer{}
	cfg := gateway.Config{StateDir: dir, Listen: "127.0.0.1:0", Host: "testhost",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cfg.File.Herdr.Disabled = true
	g := gatewaytest.Start(t, cfg)

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
	var r gateway.Reply
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
	rr, err := gateway.Ask(dir, gateway.Request{Op: "roster"})
	if err != nil {
		t.Fatal(err)
	}
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
	certDir := gatewaytest.TempDir(t)
	certFile, keyFile, pool := selfSigned(t, certDir, ips...)

	if refused, err := gateway.Open(context.Background(), gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: "0.0.0.0:0", Host: "h"}); err == nil {
		refused.Close()
		t.Fatal("0.0.0.0 without TLS: started")
	} else if !strings.Contains(err.Error(), "only loopback") || !strings.Contains(err.Error(), "--tls-cert FILE --tls-key FILE") {
		t.Fatalf("0.0.0.0 without TLS: %v", err)
	}

	cfg := gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: "0.0.0.0:0", Host: "testhost", Logger: gatewaytest.Logger(), TLSCert: certFile, TLSKey: keyFile}
	cfg.File.Herdr.Disabled = true
	g := gatewaytest.Start(t, cfg)
	if !strings.HasPrefix(g.URL(), "https://") {
		t.Fatalf("URL %s", g.URL())
	}
	_, port, _ := net.SplitHostPort(g.Addr())
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	hosts := []string{"127.0.0.1"}
	if ext != nil {
		hosts = append(hosts, ext.String())
	}
	for _, host := range hosts {
		base := "https://" + net.JoinHostPort(host, port)
		if st := gatewaytest.AuthPost(t, hc, base, ""); st != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d, want 401", base, st)
		}
		if st := gatewaytest.AuthPost(t, hc, base, tok); st != http.StatusOK {
			t.Fatalf("%s with the token: %d", base, st)
		}
		cn := gatewaytest.TokenConn(t, base, "lead@"+host, tok, transport.WithHTTPBasicClient(hc))
		gatewaytest.RosterOK(cn)
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
		if g, err := gateway.Open(context.Background(), gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: "0.0.0.0:0", Host: "h", TLSCert: c.cert, TLSKey: c.key}); err == nil {
			g.Close()
			t.Fatalf("cert %q key %q: started", c.cert, c.key)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("cert %q key %q: %v, want %q", c.cert, c.key, err, c.want)
		}
	}
	// that the command-line flags reach the gateway is cmd/herdbridge's TestGatewayTLSFlags
}
