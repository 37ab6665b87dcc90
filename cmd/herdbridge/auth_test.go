package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

func runCLI(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), err
}

// TestAuthRevoke: `register --revoke` makes every token of the entity fail
// at once — a new request, the next request of an open streamable HTTP or
// SSE session, a long poll already running — and after a restart; the
// entity keeps its inbox, its socket sessions go on, and registering again
// gives a token that works.
func TestAuthRevoke(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	_, tok1 := gatewaytest.Register(t, g, "lead", "primary")
	_, tok2 := gatewaytest.Register(t, g, "lead", "primary")
	_, other := gatewaytest.Register(t, g, "other", "primary")
	h := gatewaytest.TokenConn(t, g.URL(), "lead-http", tok1)
	sc, err := client.NewSSEMCPClient(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok2}))
	if err != nil {
		t.Fatal(err)
	}
	s := gatewaytest.NewConn(t, "lead-sse", sc)
	sock := gatewaytest.StdioConn(t, g, "lead", "primary")
	for _, cn := range []*gatewaytest.Conn{h, s, sock} {
		gatewaytest.RosterOK(cn)
	}

	polled := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = h.CallCtx(ctx, "bridge_poll", map[string]any{"wait_s": 8})
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
		if st := gatewaytest.AuthPost(t, http.DefaultClient, g.URL(), tok); st != http.StatusUnauthorized {
			t.Fatalf("revoked token: status %d, want 401", st)
		}
	}
	if st := gatewaytest.AuthPost(t, http.DefaultClient, g.URL(), other); st != http.StatusOK {
		t.Fatalf("another entity's token: status %d after revoking lead's", st)
	}
	for _, cn := range []*gatewaytest.Conn{h, s} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cn.CallCtx(ctx, "bridge_roster", map[string]any{})
		cancel()
		if err == nil {
			t.Fatalf("%s: the open session still works with its revoked token", cn.Name)
		}
		t.Logf("%s after revoke: %v", cn.Name, err)
	}
	gatewaytest.RosterOK(sock) // authenticated by the socket, not a token

	w := gatewaytest.StdioConn(t, g, "w", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "kept"}, "confirmed")
	gatewaytest.WaitHeld(t, g, "lead", 1)
	// lead's stdio session goes away for good first: its relay would
	// re-attach to the restarted gateway and hold the name against the
	// re-registration below
	sock.Client.Close()
	gatewaytest.Eventually(t, 5*time.Second, "lead's stdio session ended", func() bool {
		for _, e := range g.Core().Roster().Entities {
			if e.Name == "lead" {
				return e.Sessions == 0
			}
		}
		return false
	})
	g.Close()

	g2 := gatewaytest.StartLocal(t, dir)
	for _, tok := range []string{tok1, tok2} {
		if st := gatewaytest.AuthPost(t, http.DefaultClient, g2.URL(), tok); st != http.StatusUnauthorized {
			t.Fatalf("revoked token after a restart: status %d, want 401", st)
		}
	}
	if st := gatewaytest.AuthPost(t, http.DefaultClient, g2.URL(), other); st != http.StatusOK {
		t.Fatalf("another entity's token after a restart: status %d", st)
	}
	_, tok3 := gatewaytest.Register(t, g2, "lead", "primary")
	r := gatewaytest.TokenConn(t, g2.URL(), "lead-new", tok3).MustStatus("bridge_poll", map[string]any{"wait_s": 5}, "drained")
	if len(r.Messages) != 1 || r.Messages[0].Body != "kept" {
		t.Fatalf("after re-registering: %+v", r.Messages)
	}
}

// TestAuthRevokeWithoutGateway: with no gateway running, --revoke writes the
// state file, and the next gateway refuses the tokens.
func TestAuthRevokeWithoutGateway(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	_, keep := gatewaytest.Register(t, g, "keep", "primary")
	g.Close()
	out, err := runCLI("register", "--revoke", "--name", "lead", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "revoked 1 token(s) of lead;") {
		t.Fatalf("printed %q", out)
	}
	g2 := gatewaytest.StartLocal(t, dir)
	if st := gatewaytest.AuthPost(t, http.DefaultClient, g2.URL(), tok); st != http.StatusUnauthorized {
		t.Fatalf("token revoked offline: status %d, want 401", st)
	}
	if st := gatewaytest.AuthPost(t, http.DefaultClient, g2.URL(), keep); st != http.StatusOK {
		t.Fatalf("the other entity's token: status %d", st)
	}
}

func TestAuthRevokeErrors(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	gatewaytest.Register(t, g, "lead", "primary")
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
	empty := gatewaytest.TempDir(t)
	if _, err := runCLI("register", "--revoke", "--name", "lead", "--state-dir", empty); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("offline, no state: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "state.db")); err == nil {
		t.Error("revoking on an empty state dir created a state file")
	}
}

// TestGatewayTLSFlags: the command-line TLS flags reach the gateway (what
// they do is the gateway package's TestAuthTLS).
func TestGatewayTLSFlags(t *testing.T) {
	certFile := filepath.Join(gatewaytest.TempDir(t), "cert.pem")
	if _, err := runCLI("gateway", "--state-dir", gatewaytest.TempDir(t), "--listen", "0.0.0.0:0", "--tls-cert", certFile); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("gateway --tls-cert alone: %v", err)
	}
}

// TestStatsCommand: `herdbridge stats --json` prints the gateway's stats
// (what it counts is the gateway package's TestAttackerOnBroker), and
// `stats` a line per refusal reason.
func TestStatsCommand(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	gatewaytest.StartLocal(t, dir)
	out, err := runCLI("stats", "--json", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	var st gateway.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if st.Host != "testhost" || st.Signing || st.Refused == nil || st.Audit != filepath.Join(dir, "audit.log") || st.Runtime == nil || st.Runtime.Goroutines == 0 {
		t.Fatalf("stats: %+v", st)
	}
	if out, err = runCLI("stats", "--state-dir", dir); err != nil || !strings.Contains(out, "host testhost; signing off") || !strings.Contains(out, "refused: none") || !strings.Contains(out, " goroutines, heap ") {
		t.Fatalf("stats: %q %v", out, err)
	}
}
