package herdrtest_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

func TestPingAndSocket(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	r := mustOK(t, call(t, srv, "ping", map[string]any{}), "pong")
	if r.str("version") != "0.8.2" || r.num("protocol") != 20 {
		t.Fatalf("pong: %s", r.Raw)
	}
	if _, ok := r.get("capabilities", "live_handoff").(bool); !ok {
		t.Fatalf("pong without capabilities.live_handoff: %s", r.Raw)
	}
	if len(srv.SocketPath()) >= 100 {
		t.Fatalf("socket path too long: %s", srv.SocketPath())
	}
	fi, err := os.Stat(srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want socket 0600", fi.Mode())
	}
	if env := srv.Env(); len(env) != 1 || env[0] != "HERDR_SOCKET_PATH="+srv.SocketPath() {
		t.Fatalf("Env: %q", env)
	}
	noViolations(t, srv)
}

func TestOneRequestPerConnection(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	c := dial(t, srv)
	defer c.Close()
	two := request("a", "ping", map[string]any{}) + "\n" + request("b", "ping", map[string]any{}) + "\n"
	if _, err := c.Write([]byte(two)); err != nil {
		t.Fatal(err)
	}
	lines, rest := readAll(t, c, 5*time.Second)
	if len(lines) != 1 || rest != "" {
		t.Fatalf("want one reply then close, got %q %q", lines, rest)
	}
	if r := parseReply(t, srv.Validator(), lines[0]); r.ID != "a" || r.typ() != "pong" {
		t.Fatalf("reply %s", r.Raw)
	}
	if got := srv.Requests(); len(got) != 1 {
		t.Fatalf("the second request must never be read, requests = %q", got)
	}

	// An empty line is ignored: no reply, connection closed.
	c2 := dial(t, srv)
	defer c2.Close()
	_, _ = c2.Write([]byte("   \n"))
	if lines, rest := readAll(t, c2, 5*time.Second); len(lines) != 0 || rest != "" {
		t.Fatalf("blank line got a reply: %q %q", lines, rest)
	}
	noViolations(t, srv)
}

func TestRequestSizeLimit(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	pane := srv.AddPane(herdrtest.PaneOptions{})

	// A line of exactly 1 MiB (newline not counted) is accepted.
	prefix := fmt.Sprintf(`{"id":"big","method":"pane.send_text","params":{"pane_id":%q,"text":"`, pane)
	suffix := `"}}`
	fill := herdrtest.MaxRequestBytes - len(prefix) - len(suffix)
	line := prefix + strings.Repeat("a", fill) + suffix
	if len(line) != herdrtest.MaxRequestBytes {
		t.Fatalf("built %d bytes", len(line))
	}
	r := roundTrip(t, srv, line)
	mustOK(t, r, "ok")

	// One byte more: dropped without a reply.
	c := dial(t, srv)
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Write([]byte(prefix + strings.Repeat("a", fill+1) + suffix + "\n"))
	}()
	lines, rest := readAll(t, c, 5*time.Second)
	<-done
	if len(lines) != 0 || rest != "" {
		t.Fatalf("oversized request got a reply: %q %q", lines, rest)
	}
	eventually(t, 2*time.Second, "drop recorded", func() bool { return srv.Dropped() == 1 })

	// A line that is not UTF-8 is dropped as well.
	c3 := dial(t, srv)
	defer c3.Close()
	_, _ = c3.Write([]byte("{\"id\":\"\xff\"}\n"))
	if lines, rest := readAll(t, c3, 5*time.Second); len(lines) != 0 || rest != "" {
		t.Fatalf("non-UTF-8 request got a reply: %q %q", lines, rest)
	}
	eventually(t, 2*time.Second, "drop recorded", func() bool { return srv.Dropped() == 2 })
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("requests recorded: %d", n)
	}
	noViolations(t, srv)
}

func TestRequestMustArriveWithin5s(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	c := dial(t, srv)
	defer c.Close()
	start := time.Now()
	_, _ = c.Write([]byte(`{"id":"slow","method":"ping",`)) // no newline, ever
	lines, rest := readAll(t, c, 8*time.Second)
	if len(lines) != 0 || rest != "" {
		t.Fatalf("late request got a reply: %q %q", lines, rest)
	}
	if el := time.Since(start); el < herdrtest.InitialRequestTimeout-100*time.Millisecond || el > herdrtest.InitialRequestTimeout+2*time.Second {
		t.Fatalf("dropped after %v, want ~5s", el)
	}
	if srv.Dropped() != 1 {
		t.Fatalf("Dropped = %d", srv.Dropped())
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.AllowInvalidRequests())
	for _, tc := range []struct{ line, want string }{
		{`{"id":1,"method":"ping","params":{}}`, "expected a string"},
		{`this is not json`, "invalid request"},
		{`["ping"]`, "invalid request"},
		{`{"id":"x","method":"nope.nothing","params":{}}`, "unknown variant `nope.nothing`"},
		{`{"id":"x","method":"ping"}`, "params"},
		{`{"id":"x","method":"pane.read","params":{"pane_id":"w1:p1"}}`, "source"},
		{`{"jsonrpc":"2.0","id":"x","method":"ping","params":{}}`, ""}, // unknown fields are ignored
	} {
		r := roundTrip(t, srv, tc.line)
		if tc.want == "" {
			mustOK(t, r, "pong")
			continue
		}
		mustErr(t, r, "invalid_request")
		if r.ID != "" {
			t.Errorf("%s: invalid_request must carry id \"\", got %q", tc.line, r.ID)
		}
		if !strings.Contains(r.Error.Message, tc.want) {
			t.Errorf("%s: message %q does not mention %q", tc.line, r.Error.Message, tc.want)
		}
	}
	// Six of them break the schema; the lenient server kept a list.
	if got := len(srv.Violations()); got != 6 {
		t.Fatalf("violations = %d, want 6:\n%s", got, strings.Join(srv.Violations(), "\n"))
	}
}

// recTB catches what the fake reports to its testing.TB.
type recTB struct {
	testing.TB
	errs []string
}

func (r *recTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestNonSchemaRequestFailsTheTest(t *testing.T) {
	t.Parallel()
	rt := &recTB{TB: t}
	srv := herdrtest.New(rt)
	pane := srv.AddPane(herdrtest.PaneOptions{})
	// "source" is required by the schema: a client sending this is buggy.
	r := roundTrip(t, srv, fmt.Sprintf(`{"id":"x","method":"pane.read","params":{"pane_id":%q}}`, pane))
	mustErr(t, r, "invalid_request")
	// A well-formed request passes.
	mustOK(t, call(t, srv, "pane.read", map[string]any{"pane_id": pane, "source": "visible"}), "pane_read")
	_ = srv.Close()
	if len(rt.errs) != 1 || !strings.Contains(rt.errs[0], "request violates the herdr schema") || !strings.Contains(rt.errs[0], `"method":"pane.read"`) {
		t.Fatalf("reported: %q", rt.errs)
	}
}

func TestWaitAbortsOnHalfClose(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{Status: "working"})
	c := dial(t, srv)
	defer c.Close()
	if _, err := c.Write([]byte(request("w", "agent.wait", map[string]any{"target": pane, "timeout_ms": 10000}) + "\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	lines, rest := readAll(t, c, 3*time.Second)
	if len(lines) != 0 || rest != "" {
		t.Fatalf("aborted wait must not reply, got %q %q", lines, rest)
	}
	eventually(t, time.Second, "abort recorded", func() bool { return srv.Aborted() == 1 })
	if a := srv.Aborts()[0]; a.Method != "agent.wait" || a.ID != "w" || a.Reason != "eof" {
		t.Fatalf("abort = %+v", a)
	}
	noViolations(t, srv)
}

func TestWaitAbortsOnExtraBytes(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t, herdrtest.WithTurnDuration(0))
	pane := srv.AddAgent(herdrtest.PaneOptions{Status: "working"})

	// Pipelined in the same write as the request…
	c := dial(t, srv)
	defer c.Close()
	_, _ = c.Write([]byte(request("p", "events.wait", map[string]any{
		"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": "idle"},
		"timeout_ms":  10000,
	}) + "\n{"))
	lines, _ := readAll(t, c, 3*time.Second)
	if len(lines) != 0 {
		t.Fatalf("got %q", lines)
	}

	// …or written later, while the wait runs.
	c2 := dial(t, srv)
	defer c2.Close()
	_, _ = c2.Write([]byte(request("q", "agent.prompt", map[string]any{"target": pane, "text": "go on", "wait": map[string]any{"timeout_ms": 10000}}) + "\n"))
	time.Sleep(250 * time.Millisecond)
	_, _ = c2.Write([]byte("\n"))
	lines, _ = readAll(t, c2, 3*time.Second)
	if len(lines) != 0 {
		t.Fatalf("got %q", lines)
	}
	eventually(t, time.Second, "aborts recorded", func() bool { return srv.Aborted() == 2 })
	for _, a := range srv.Aborts() {
		if a.Reason != "extra_bytes" {
			t.Fatalf("abort = %+v", a)
		}
	}
	noViolations(t, srv)
}

func TestFaultInjection(t *testing.T) {
	t.Parallel()
	srv := herdrtest.New(t)
	srv.GarbleNextReply("ping")
	c := dial(t, srv)
	_, _ = c.Write([]byte(request("g", "ping", map[string]any{}) + "\n"))
	b, _ := io.ReadAll(c)
	c.Close()
	if err := srv.Validator().ValidateResponse(b); err == nil || !strings.HasSuffix(string(b), "\n") {
		t.Fatalf("garbled reply %q should be one unparsable line", b)
	}

	srv.DropNextReply("")
	c = dial(t, srv)
	_, _ = c.Write([]byte(request("d", "pane.list", map[string]any{}) + "\n"))
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("dropped reply wrote %q", b)
	}
	c.Close()

	srv.DelayNextReply("ping", 300*time.Millisecond)
	t0 := time.Now()
	mustOK(t, call(t, srv, "ping", map[string]any{}), "pong")
	if time.Since(t0) < 300*time.Millisecond {
		t.Fatal("reply was not delayed")
	}

	srv.FailNextReply("pane.list", "server_unavailable", "timed out waiting for app response")
	mustErr(t, call(t, srv, "pane.list", map[string]any{}), "server_unavailable")
	mustOK(t, call(t, srv, "pane.list", map[string]any{}), "pane_list") // only the next one

	srv.InjectFault("ping", herdrtest.Fault{Raw: []byte(`{"id":"other","result":{"type":"pong","version":"0.8.2","protocol":20}}` + "\n")})
	r := roundTrip(t, srv, request("mine", "ping", map[string]any{}))
	if r.ID != "other" {
		t.Fatalf("raw fault not applied: %s", r.Raw)
	}
	noViolations(t, srv)
}
