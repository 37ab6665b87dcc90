package herdrtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Wire constants of herdr 0.8.2 (src/api/server.rs).
const (
	MaxRequestBytes       = 1 << 20                // MAX_INITIAL_REQUEST_BYTES, newline not counted
	InitialRequestTimeout = 5 * time.Second        // INITIAL_REQUEST_TIMEOUT
	StreamWriteTimeout    = 5 * time.Second        // STREAM_WRITE_TIMEOUT
	PollInterval          = 100 * time.Millisecond // CONNECTION_POLL_INTERVAL
	DefaultProtocol       = 20
	DefaultVersion        = "0.8.2"
)

// Default timings of the simulation (all adjustable per Server).
const (
	DefaultSubmitDelay  = 300 * time.Millisecond // AGENT_PROMPT_SUBMIT_DELAY
	DefaultTurnDuration = 250 * time.Millisecond
	DefaultStartDelay   = 200 * time.Millisecond
	DefaultStallTimeout = 5 * time.Second // AGENT_PROMPT_EFFECT_TIMEOUT_MS
)

// releaseVersions maps protocol numbers to the herdr release that spoke them.
var releaseVersions = map[int]string{14: "0.7.1", 16: "0.7.4", 17: "0.7.5", 19: "0.8.0", 20: "0.8.2"}

// Option configures a Server at start.
type Option func(*config)

type config struct {
	protocol     int
	version      string
	submitDelay  time.Duration
	turnDuration time.Duration
	startDelay   time.Duration
	stallTimeout time.Duration
	shellStartup time.Duration
	schemaPath   string
	socketPath   string
	allowInvalid bool
	noValidate   bool
	logLines     bool
}

// WithProtocol makes ping report protocol n and gates methods as that
// protocol did (see SetProtocol).
func WithProtocol(n int) Option { return func(c *config) { c.protocol = n } }

// WithVersion sets the version string ping reports.
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithSubmitDelay sets the delay between agent.prompt's text write and its
// Enter write (herdr: 300 ms).
func WithSubmitDelay(d time.Duration) Option { return func(c *config) { c.submitDelay = d } }

// WithTurnDuration sets how long a simulated agent works on a prompt before
// it goes idle; 0 means turns only end through FinishTurn or SetStatus.
func WithTurnDuration(d time.Duration) Option { return func(c *config) { c.turnDuration = d } }

// WithStartDelay sets how long a launched agent stays launch_pending.
func WithStartDelay(d time.Duration) Option { return func(c *config) { c.startDelay = d } }

// WithStallTimeout sets agent.prompt's wait gate (herdr: 5 s). A wait whose
// timeout_ms is at most this long times out with "timeout" instead of
// "agent_prompt_stalled".
func WithStallTimeout(d time.Duration) Option { return func(c *config) { c.stallTimeout = d } }

// WithShellStartup makes every shell pane that workspace.create,
// tab.create, pane.split or layout.apply opens busy for d, as while the
// shell's rc files still run child processes: agent.start answers
// agent_pane_busy until then (see SetShellStartup).
func WithShellStartup(d time.Duration) Option { return func(c *config) { c.shellStartup = d } }

// WithSocketPath makes the server listen on path instead of a socket in a
// new temporary directory, e.g. to start herdr "later" at a path a client
// already polls. The directory must exist; a stale socket file at path is
// removed first, as herdr does, but a path some live server answers on is
// refused. Close removes the socket file only. path must be shorter than
// 104 bytes (sun_path).
func WithSocketPath(path string) Option { return func(c *config) { c.socketPath = path } }

// WithSchema loads the JSON Schema from path instead of DefaultSchemaPath.
func WithSchema(path string) Option { return func(c *config) { c.schemaPath = path } }

// AllowInvalidRequests stops request lines that violate the schema from
// failing the test; they are still answered (invalid_request) and listed by
// Violations. Use it for tests that send broken requests on purpose.
func AllowInvalidRequests() Option { return func(c *config) { c.allowInvalid = true } }

// WithoutValidation turns schema validation off: for benchmarks, where
// validating every line would be measured as the bridge's cost. Tests keep
// it on.
func WithoutValidation() Option { return func(c *config) { c.noValidate = true } }

// WithWireLog logs every request, reply and event line through tb.Logf.
func WithWireLog() Option { return func(c *config) { c.logLines = true } }

// Abort records a long-running request the server gave up without replying
// because its client half-closed (Reason "eof") or wrote more bytes after
// the request line (Reason "extra_bytes").
type Abort struct {
	Method, ID, Reason string
}

// Fault alters the reply to one future request; see InjectFault.
type Fault struct {
	// Delay holds the reply back this long (the method has already run).
	Delay time.Duration
	// Garbage replaces the reply with a truncated, unparsable JSON line.
	Garbage bool
	// Raw replaces the reply with these exact bytes (no newline added).
	Raw []byte
	// Drop closes the connection without any reply (the method has run).
	Drop bool
	// Code and Message, when Code is set, answer with this error instead of
	// running the method at all.
	Code, Message string
}

type fault struct {
	method string
	f      Fault
}

// Server is a fake herdr server on a Unix socket. Its zero value is not
// usable; create one with New or Start. All methods are safe for concurrent
// use.
type Server struct {
	tb      testing.TB
	v       *Validator
	cfg     config
	ln      *net.UnixListener
	path    string
	cleanup func() // removes the socket (and the temporary directory)

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	timers map[*time.Timer]struct{}
	wake   chan struct{}

	// world
	workspaces []*workspace
	focusedWS  *workspace
	panes      map[string]*pane // live panes
	everPanes  map[string]*pane // every pane ever created (for accessors)
	paneOrder  []*pane
	nextWS     int
	nextTerm   int
	events     []event
	eventSeq   uint64

	// config that tests may change at run time
	protocol     int
	version      string
	submitDelay  time.Duration
	turnDuration time.Duration
	startDelay   time.Duration
	stallTimeout time.Duration
	shellStartup time.Duration
	trustDialog  bool

	// raw lines for every open subscription (SendRawEvent)
	rawEvents [][]byte

	// records
	requests   []string
	sent       []string
	aborts     []Abort
	violations []string
	dropped    int
	faults     []fault
}

// New starts a Server for a test. Every request line it receives and every
// reply and event line it sends is validated against the JSON Schema; a
// violation fails tb (t.Errorf) with the offending line. The server is closed
// by tb.Cleanup.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := start(tb, opts)
	if err != nil {
		tb.Fatalf("herdrtest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Start starts a Server without a testing.TB: lines are still checked
// against the schema (invalid requests get invalid_request, as from serde)
// and violations are listed by Violations, but nothing fails by itself.
// The caller must Close it.
func Start(opts ...Option) (*Server, error) { return start(nil, opts) }

func start(tb testing.TB, opts []Option) (*Server, error) {
	cfg := config{
		protocol:     DefaultProtocol,
		submitDelay:  DefaultSubmitDelay,
		turnDuration: DefaultTurnDuration,
		startDelay:   DefaultStartDelay,
		stallTimeout: DefaultStallTimeout,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.version == "" {
		cfg.version = releaseVersions[cfg.protocol]
		if cfg.version == "" {
			cfg.version = DefaultVersion
		}
	}
	var v *Validator
	var err error
	if cfg.schemaPath != "" {
		v, err = NewValidator(cfg.schemaPath)
	} else {
		v, err = DefaultValidator()
	}
	if err != nil {
		return nil, err
	}
	var dir, path string
	if cfg.socketPath != "" {
		path = cfg.socketPath
		if len(path) >= 104 {
			return nil, fmt.Errorf("socket path %q is too long for sun_path", path)
		}
		if _, err := os.Lstat(path); err == nil {
			if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
				_ = c.Close()
				return nil, fmt.Errorf("a server already answers on %s", path)
			}
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("remove stale socket: %w", err)
			}
		}
	} else {
		if dir, err = os.MkdirTemp("", "hr"); err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "herdr.sock")
		if len(path) >= 100 { // sun_path is 104/108 bytes
			_ = os.RemoveAll(dir)
			if dir, err = os.MkdirTemp("/tmp", "hr"); err != nil {
				return nil, err
			}
			path = filepath.Join(dir, "herdr.sock")
		}
	}
	cleanup := func() {
		if dir != "" {
			_ = os.RemoveAll(dir)
		} else {
			_ = os.Remove(path)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // Close removes it (or its directory) itself
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		cleanup()
		return nil, err
	}
	s := &Server{
		tb:           tb,
		v:            v,
		cfg:          cfg,
		ln:           ln,
		path:         path,
		closing:      make(chan struct{}),
		conns:        map[net.Conn]struct{}{},
		timers:       map[*time.Timer]struct{}{},
		wake:         make(chan struct{}),
		panes:        map[string]*pane{},
		everPanes:    map[string]*pane{},
		protocol:     cfg.protocol,
		version:      cfg.version,
		submitDelay:  cfg.submitDelay,
		turnDuration: cfg.turnDuration,
		startDelay:   cfg.startDelay,
		stallTimeout: cfg.stallTimeout,
		shellStartup: cfg.shellStartup,
		cleanup:      cleanup,
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// SocketPath is the Unix socket to connect to (what HERDR_SOCKET_PATH would
// hold). It is shorter than 100 bytes.
func (s *Server) SocketPath() string { return s.path }

// Env returns HERDR_SOCKET_PATH=<socket> for a child process environment.
func (s *Server) Env() []string { return []string{"HERDR_SOCKET_PATH=" + s.path} }

// Validator returns the schema validator the server uses.
func (s *Server) Validator() *Validator { return s.v }

// Close stops the server: the listener closes, running waits and
// subscriptions end without a reply (as when herdr shuts down), timers stop,
// and Close returns once every goroutine of the server has exited.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		_ = s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.Close()
		}
		for t := range s.timers {
			if t.Stop() {
				s.wg.Done()
			}
			delete(s.timers, t)
		}
		s.notifyLocked()
		s.mu.Unlock()
		s.wg.Wait()
		s.cleanup()
	})
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(conn)
	}
}

// afterLocked runs fn with s.mu held after d, unless the server closes first.
func (s *Server) afterLocked(d time.Duration, fn func()) {
	if s.closed {
		return
	}
	s.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer s.wg.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.timers[t]; !ok {
			return
		}
		delete(s.timers, t)
		if s.closed {
			return
		}
		fn()
	})
	s.timers[t] = struct{}{}
}

// notifyLocked wakes every waiter to re-check the world.
func (s *Server) notifyLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Server) logf(format string, args ...any) {
	if s.tb != nil && s.cfg.logLines {
		s.tb.Logf(format, args...)
	}
}

// violation records a schema violation; fatal ones fail the test.
func (s *Server) violation(fatal bool, what string, err error, line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violationLocked(fatal, what, err, line)
}

func (s *Server) violationLocked(fatal bool, what string, err error, line []byte) {
	msg := fmt.Sprintf("herdrtest: %s violates the herdr schema: %v\n\tline: %s", what, err, clip(line))
	s.violations = append(s.violations, msg)
	if fatal && s.tb != nil {
		s.tb.Errorf("%s", msg)
	}
}

func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return string(b)
}

// ---- connection handling -----------------------------------------------------

type request struct {
	id     string
	method string
	params json.RawMessage
}

type connCtx struct {
	conn   *net.UnixConn
	req    *request
	done   chan struct{} // closed when the probe saw something
	reason string        // set before done closes: "eof", "extra_bytes" or "" (closed by us)
	logged bool
}

var errDrop = errors.New("drop")

// readRequestLine reads the first line within InitialRequestTimeout. It
// returns the line without its newline and any bytes the client sent after
// it. Oversized, late or non-UTF-8 lines give errDrop.
func readRequestLine(conn *net.UnixConn) (line, extra []byte, err error) {
	_ = conn.SetReadDeadline(time.Now().Add(InitialRequestTimeout))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 64*1024)
	for {
		n, rerr := conn.Read(chunk)
		if n > 0 {
			start := len(buf)
			buf = append(buf, chunk[:n]...)
			if i := bytes.IndexByte(buf[start:], '\n'); i >= 0 {
				end := start + i
				if end > MaxRequestBytes || !utf8.Valid(buf[:end]) {
					return nil, nil, errDrop
				}
				return buf[:end], append([]byte(nil), buf[end+1:]...), nil
			}
			if len(buf) > MaxRequestBytes {
				return nil, nil, errDrop
			}
		}
		if rerr != nil {
			var ne net.Error
			if errors.As(rerr, &ne) && ne.Timeout() {
				return nil, nil, errDrop
			}
			return nil, nil, rerr // EOF before a newline: the client left
		}
	}
}

func (s *Server) serveConn(conn *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		_ = conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	line, extra, err := readRequestLine(conn)
	if err != nil {
		if err == errDrop {
			s.mu.Lock()
			if !s.closed {
				s.dropped++
			}
			s.mu.Unlock()
		}
		return
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, string(line))
	s.mu.Unlock()
	s.logf("herdrtest <- %s", clip(line))

	req, bad := s.parseRequest(trimmed)
	if bad != nil {
		s.deliver(conn, nil, bad, nil)
		return
	}
	c := &connCtx{conn: conn, req: req}
	f := s.takeFault(req.method)
	if f != nil && f.Code != "" {
		s.deliver(conn, req, errorLine(req.id, f.Code, f.Message), f)
		return
	}
	switch req.method {
	case "events.subscribe", "events.wait", "agent.wait", "pane.wait_for_output", "agent.prompt":
		s.startProbe(c, extra)
	}
	var reply []byte
	switch req.method {
	case "events.subscribe":
		s.subscribe(c, f)
		return
	case "events.wait":
		reply = s.eventsWait(c)
	case "agent.wait":
		reply = s.agentWait(c)
	case "pane.wait_for_output":
		reply = s.waitForOutput(c)
	case "agent.prompt":
		reply = s.agentPrompt(c)
	default:
		s.mu.Lock()
		reply = s.handleLocked(req)
		s.mu.Unlock()
	}
	if reply == nil {
		return // the client went away (or the server is closing): no reply
	}
	s.deliver(conn, req, reply, f)
}

// deliver writes one reply line, applying a fault if one was injected. It
// reports whether the real reply went out.
func (s *Server) deliver(conn *net.UnixConn, req *request, reply []byte, f *Fault) bool {
	if f != nil {
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				return false
			}
		}
		switch {
		case f.Drop:
			return false
		case f.Raw != nil:
			s.writeRaw(conn, f.Raw)
			return false
		case f.Garbage:
			id := ""
			if req != nil {
				id = req.id
			}
			s.writeRaw(conn, []byte(fmt.Sprintf(`{"id":%q,"result":{"type":`+"\n", id)))
			return false
		}
	}
	if err := s.validate(s.v.ValidateResponse, reply); err != nil {
		s.violation(true, "reply", err, reply)
	}
	if err := noNulls(reply); err != nil {
		s.violation(true, "reply", err, reply)
	}
	return s.writeLine(conn, reply)
}

func (s *Server) writeRaw(conn *net.UnixConn, b []byte) bool {
	_ = conn.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	_, err := conn.Write(b)
	return err == nil
}

func (s *Server) writeLine(conn *net.UnixConn, line []byte) bool {
	s.mu.Lock()
	s.sent = append(s.sent, string(line))
	s.mu.Unlock()
	s.logf("herdrtest -> %s", clip(line))
	return s.writeRaw(conn, append(append([]byte(nil), line...), '\n'))
}

// startProbe watches the connection the way herdr's probe_stream_closed
// does: EOF or any byte from the client means the client is gone.
func (s *Server) startProbe(c *connCtx, extra []byte) {
	c.done = make(chan struct{})
	if len(extra) > 0 {
		c.reason = "extra_bytes"
		close(c.done)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var b [1]byte
		n, err := c.conn.Read(b[:])
		switch {
		case n > 0:
			c.reason = "extra_bytes"
		case errors.Is(err, io.EOF):
			c.reason = "eof"
		}
		close(c.done)
	}()
}

// gone reports (at most once per check, as herdr probes between polls)
// whether the wait must end without a reply.
func (s *Server) gone(c *connCtx) bool {
	select {
	case <-s.closing:
		return true
	default:
	}
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
	default:
		return false
	}
	if c.reason != "" && !c.logged {
		c.logged = true
		s.mu.Lock()
		s.aborts = append(s.aborts, Abort{Method: c.req.method, ID: c.req.id, Reason: c.reason})
		s.mu.Unlock()
		s.logf("herdrtest: %s %q aborted: client %s", c.req.method, c.req.id, c.reason)
	}
	return true
}

// waitFor re-evaluates step (with s.mu held) whenever the world changes and
// at least every PollInterval, probing the client before each evaluation.
// step returns the reply or nil to keep waiting; once expired is true it must
// return a reply. waitFor returns nil when the client went away.
func (s *Server) waitFor(c *connCtx, deadline time.Time, step func(expired bool) []byte) []byte {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		if s.gone(c) {
			return nil
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil
		}
		expired := !deadline.IsZero() && !time.Now().Before(deadline)
		reply := step(expired)
		wake := s.wake
		s.mu.Unlock()
		if reply != nil {
			return reply
		}
		if expired {
			panic("herdrtest: wait step returned no reply after its deadline")
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-timeout:
		case <-s.closing:
		}
	}
}

func (s *Server) takeFault(method string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.method == "" || f.method == method {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			ff := f.f
			return &ff
		}
	}
	return nil
}

// ---- request parsing (serde emulation) ------------------------------------------

// gatedMethods are absent below the given protocol (API.md §1.4: v0.7.5 =
// protocol 17 added agent.prompt, agent.wait and agent.send_keys).
var gatedMethods = map[string]int{
	"agent.prompt":    17,
	"agent.wait":      17,
	"agent.send_keys": 17,
}

func (s *Server) methodAvailable(m string) bool {
	if !s.v.HasMethod(m) {
		return false
	}
	s.mu.Lock()
	p := s.protocol
	s.mu.Unlock()
	return p >= gatedMethods[m]
}

// parseRequest validates the line against the schema (reporting violations)
// and then decides, like serde would, whether herdr accepts it. Every
// rejection is invalid_request with id "" (0.8.2 does not recover the id).
func (s *Server) parseRequest(line []byte) (*request, []byte) {
	verr := s.validate(s.v.ValidateRequest, line)
	if verr != nil {
		s.violation(!s.cfg.allowInvalid, "request", verr, line)
	}
	req, bad := s.serdeCheck(line)
	if bad != nil {
		return nil, bad
	}
	if verr != nil {
		return nil, errorLine("", "invalid_request", "invalid request: "+oneLine(verr.Error()))
	}
	return req, nil
}

func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func (s *Server) serdeCheck(line []byte) (*request, []byte) {
	invalid := func(format string, args ...any) (*request, []byte) {
		return nil, errorLine("", "invalid_request", "invalid request: "+fmt.Sprintf(format, args...))
	}
	var raw any
	if err := json.Unmarshal(line, &raw); err != nil {
		return invalid("%v at line 1", err)
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return invalid("invalid type: %s, expected struct Request at line 1", jsonKind(raw))
	}
	idv, ok := obj["id"]
	if !ok {
		return invalid("missing field `id` at line 1")
	}
	id, ok := idv.(string)
	if !ok {
		return invalid("invalid type: %s, expected a string at line 1", jsonKind(idv))
	}
	mv, ok := obj["method"]
	if !ok {
		return invalid("missing field `method` at line 1")
	}
	m, ok := mv.(string)
	if !ok {
		return invalid("invalid type: %s, expected a string at line 1", jsonKind(mv))
	}
	if !s.methodAvailable(m) {
		var names []string
		for _, n := range s.v.Methods() {
			if s.methodAvailable(n) {
				names = append(names, "`"+n+"`")
			}
		}
		return invalid("unknown variant `%s`, expected one of %s at line 1", m, strings.Join(names, ", "))
	}
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(line, &env)
	if len(env.Params) == 0 || string(env.Params) == "null" {
		return invalid("missing field `params` at line 1")
	}
	return &request{id: id, method: m, params: env.Params}, nil
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean `%v`", x)
	case float64:
		return fmt.Sprintf("integer `%v`", x)
	case string:
		return fmt.Sprintf("string %q", x)
	case []any:
		return "sequence"
	default:
		return "map"
	}
}

// noNulls enforces herdr's skip_serializing_if: optional fields are omitted,
// never sent as null.
func noNulls(line []byte) error {
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return err
	}
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		switch x := v.(type) {
		case nil:
			return fmt.Errorf("%s is null; herdr omits optional fields", path)
		case map[string]any:
			for k, e := range x {
				if err := walk(path+"/"+k, e); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(fmt.Sprintf("%s/%d", path, i), e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("", v)
}

// ---- JSON helpers ------------------------------------------------------------------

// obj is a JSON object that keeps its key order ("type" first, like serde).
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func mustMarshal(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic(fmt.Sprintf("herdrtest: marshal: %v", err))
	}
	return b
}

func okLine(id string, result obj) []byte {
	return mustMarshal(obj{{"id", id}, {"result", result}})
}

func errorLine(id, code, message string) []byte {
	return mustMarshal(obj{{"id", id}, {"error", obj{{"code", code}, {"message", message}}}})
}

// validate applies check to line unless validation is off.
func (s *Server) validate(check func([]byte) error, line []byte) error {
	if s.cfg.noValidate {
		return nil
	}
	return check(line)
}
