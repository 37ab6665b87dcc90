package herdrtest_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests talk to the fake with raw socket I/O, like a minimal herdr
// client, and check every line they read against the schema themselves too.

var idSeq atomic.Int64

func nextID() string { return fmt.Sprintf("t%d", idSeq.Add(1)) }

type errBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type reply struct {
	Raw    string
	ID     string
	Result map[string]any
	Error  *errBody
}

func (r reply) typ() string {
	if r.Result == nil {
		return ""
	}
	s, _ := r.Result["type"].(string)
	return s
}

// obj digs into a decoded JSON object: r.get("agent", "agent_status").
func (r reply) get(path ...string) any {
	var cur any = r.Result
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func (r reply) str(path ...string) string { s, _ := r.get(path...).(string); return s }

func (r reply) num(path ...string) float64 { f, _ := r.get(path...).(float64); return f }

func parseReply(t testing.TB, v *herdrtest.Validator, line string) reply {
	t.Helper()
	if err := v.ValidateResponse([]byte(line)); err != nil {
		t.Errorf("client side: reply violates the schema: %v\n%s", err, line)
	}
	var w struct {
		ID     *string         `json:"id"`
		Result map[string]any  `json:"result"`
		Error  *errBody        `json:"error"`
		Extra  json.RawMessage `json:"-"`
	}
	if err := json.Unmarshal([]byte(line), &w); err != nil {
		t.Fatalf("reply is not JSON: %v\n%q", err, line)
	}
	if w.ID == nil {
		t.Fatalf("reply has no id: %s", line)
	}
	return reply{Raw: line, ID: *w.ID, Result: w.Result, Error: w.Error}
}

func dial(t testing.TB, srv *herdrtest.Server) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: srv.SocketPath(), Net: "unix"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

// readAll reads everything until EOF (or timeout) and splits it in lines.
func readAll(t testing.TB, c net.Conn, timeout time.Duration) (lines []string, rest string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("read: %v (got %q)", err, b)
	}
	s := string(b)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return lines, s
		}
		lines = append(lines, s[:i])
		s = s[i+1:]
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || errors.Is(err, io.EOF))
}

// roundTrip sends raw (a newline is added) on a new connection and returns
// the single reply line; it fails unless the server then closes.
func roundTrip(t testing.TB, srv *herdrtest.Server, raw string) reply {
	t.Helper()
	c := dial(t, srv)
	defer c.Close()
	if _, err := c.Write([]byte(raw + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	lines, rest := readAll(t, c, 15*time.Second)
	if len(lines) != 1 || rest != "" {
		t.Fatalf("want exactly one reply line then close, got %q + %q", lines, rest)
	}
	return parseReply(t, srv.Validator(), lines[0])
}

func request(id, method string, params any) string {
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// call performs one request and checks the echoed id.
func call(t testing.TB, srv *herdrtest.Server, method string, params any) reply {
	t.Helper()
	id := nextID()
	r := roundTrip(t, srv, request(id, method, params))
	if r.ID != id {
		t.Fatalf("%s: reply id %q, want %q: %s", method, r.ID, id, r.Raw)
	}
	return r
}

func mustOK(t testing.TB, r reply, typ string) reply {
	t.Helper()
	if r.Error != nil || r.typ() != typ {
		t.Fatalf("want result %q, got %s", typ, r.Raw)
	}
	return r
}

func mustErr(t testing.TB, r reply, code string) reply {
	t.Helper()
	if r.Error == nil || r.Error.Code != code {
		t.Fatalf("want error %q, got %s", code, r.Raw)
	}
	return r
}

// pending is a request whose reply has not been read yet.
type pending struct {
	c     *net.UnixConn
	lines chan []string
}

// start sends a (long-running) request and collects everything the server
// writes until it closes the connection.
func start(t testing.TB, srv *herdrtest.Server, method string, params any) *pending {
	t.Helper()
	c := dial(t, srv)
	if _, err := c.Write([]byte(request(nextID(), method, params) + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	p := &pending{c: c, lines: make(chan []string, 1)}
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(c)
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
		p.lines <- out
	}()
	return p
}

// result waits for the reply of a pending request.
func (p *pending) result(t testing.TB, srv *herdrtest.Server, within time.Duration) reply {
	t.Helper()
	defer p.c.Close()
	select {
	case lines := <-p.lines:
		if len(lines) != 1 {
			t.Fatalf("want one reply line, got %q", lines)
		}
		return parseReply(t, srv.Validator(), lines[0])
	case <-time.After(within):
		p.c.Close()
		<-p.lines
		t.Fatalf("no reply within %v", within)
		return reply{}
	}
}

// stillWaiting asserts that no reply has arrived yet.
func (p *pending) stillWaiting(t testing.TB) {
	t.Helper()
	select {
	case lines := <-p.lines:
		t.Fatalf("wait ended early: %q", lines)
	default:
	}
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func noViolations(t testing.TB, srv *herdrtest.Server) {
	t.Helper()
	for _, v := range srv.Violations() {
		t.Errorf("%s", v)
	}
}

// scanner reads event lines from a subscription connection.
type stream struct {
	c  *net.UnixConn
	rd *bufio.Reader
}

func subscribe(t testing.TB, srv *herdrtest.Server, subs ...map[string]any) (*stream, reply) {
	t.Helper()
	c := dial(t, srv)
	if _, err := c.Write([]byte(request(nextID(), "events.subscribe", map[string]any{"subscriptions": subs}) + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	s := &stream{c: c, rd: bufio.NewReader(c)}
	line := s.next(t, 5*time.Second)
	return s, parseReply(t, srv.Validator(), line)
}

func (s *stream) next(t testing.TB, within time.Duration) string {
	t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(within))
	line, err := s.rd.ReadString('\n')
	if err != nil {
		t.Fatalf("stream read: %v (partial %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// event reads the next event line, validates it, and decodes it.
func (s *stream) event(t testing.TB, srv *herdrtest.Server, within time.Duration) (name string, data map[string]any, line string) {
	t.Helper()
	line = s.next(t, within)
	if err := srv.Validator().ValidateEvent([]byte(line)); err != nil {
		t.Errorf("client side: event violates the schema: %v\n%s", err, line)
	}
	var e struct {
		Event string         `json:"event"`
		Data  map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("event is not JSON: %v: %q", err, line)
	}
	return e.Event, e.Data, line
}

// quiet asserts no event arrives for d.
func (s *stream) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(d))
	line, err := s.rd.ReadString('\n')
	if err == nil {
		t.Fatalf("unexpected event: %s", line)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("stream ended: %v", err)
	}
}
