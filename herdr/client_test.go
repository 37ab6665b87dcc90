package herdr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newFake starts a fake herdr and a client for it. At the end of the test
// (before the fake closes) it checks that nothing the client sent, nor
// anything the fake answered, violated herdr's schema.
func newFake(t *testing.T, opts ...herdrtest.Option) (*herdrtest.Server, *Client) {
	t.Helper()
	fake := herdrtest.New(t, opts...)
	t.Cleanup(func() { noViolations(t, fake) })
	return fake, &Client{Path: fake.SocketPath()}
}

func noViolations(t *testing.T, fake *herdrtest.Server) {
	t.Helper()
	for _, v := range fake.Violations() {
		t.Errorf("%s", v)
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requests decodes the fake's request log, keeping those for method.
func requests(t *testing.T, fake *herdrtest.Server, method string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range fake.Requests() {
		var r struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("request %q: %v", l, err)
		}
		if r.Method == method {
			out = append(out, r.Params)
		}
	}
	return out
}

func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func TestClientMethods(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithStartDelay(50*time.Millisecond),
		herdrtest.WithSubmitDelay(30*time.Millisecond), herdrtest.WithTurnDuration(100*time.Millisecond))
	ctx := t.Context()
	shell := fake.AddPane(herdrtest.PaneOptions{Cwd: "/repo", Lines: []string{"hello from the shell"}})
	agent := fake.AddAgent(herdrtest.PaneOptions{Name: "reviewer"})

	pong, err := c.Ping(ctx)
	if err != nil || pong.Protocol != 20 || pong.Version != "0.8.2" || !pong.Capabilities["live_handoff"] {
		t.Fatalf("ping %+v %v", pong, err)
	}

	panes, err := c.PaneList(ctx)
	if err != nil || len(panes) != 2 {
		t.Fatalf("pane.list %+v %v", panes, err)
	}
	if panes[0].PaneID != shell || panes[0].AgentStatus != StatusUnknown || panes[0].Cwd != "/repo" ||
		panes[1].PaneID != agent || panes[1].Agent != "claude" || panes[1].AgentStatus != StatusDone {
		t.Fatalf("pane.list %+v", panes)
	}
	if p, err := c.PaneGet(ctx, shell); err != nil || p.PaneID != shell || p.TerminalID == "" || p.WorkspaceID == "" || p.TabID == "" {
		t.Fatalf("pane.get %+v %v", p, err)
	}

	rd, err := c.PaneRead(ctx, shell, SourceUnwrapped, 10)
	if err != nil || rd.PaneID != shell || rd.Source != SourceUnwrapped || rd.Format != "text" || !strings.Contains(rd.Text, "hello from the shell") {
		t.Fatalf("pane.read %+v %v", rd, err)
	}
	if rd, err = c.PaneRead(ctx, shell, SourceVisible, 0); err != nil || !strings.Contains(rd.Text, "hello") {
		t.Fatalf("pane.read visible %+v %v", rd, err)
	}

	if err := c.PaneSendInput(ctx, shell, "echo delta", "enter"); err != nil {
		t.Fatal(err)
	}
	if scr := fake.Screen(shell); !strings.Contains(scr, "$ echo delta\ndelta") {
		t.Fatalf("send_input did not run: %q", scr)
	}
	if w := fake.Writes(shell); len(w) != 1 || string(w[0]) != "echo delta\r" { // one PTY write
		t.Fatalf("writes %q", w)
	}
	if err := c.PaneSendInput(ctx, shell, "draft"); err != nil {
		t.Fatal(err)
	}
	if err := c.PaneSendKeys(ctx, shell, "ctrl+u"); err != nil {
		t.Fatal(err)
	}
	if fake.Composer(shell) != "" {
		t.Fatalf("ctrl+u not sent: %q", fake.Composer(shell))
	}

	a, err := c.AgentGet(ctx, "reviewer")
	if err != nil || a.PaneID != agent || a.Name != "reviewer" || a.Agent != "claude" || a.AgentStatus != StatusDone {
		t.Fatalf("agent.get %+v %v", a, err)
	}
	seq := a.StateChangeSeq
	if a, err = c.AgentPrompt(ctx, agent, "Review the diff"); err != nil || a.PaneID != agent {
		t.Fatalf("agent.prompt %+v %v", a, err)
	}
	eventually(t, 2*time.Second, "prompt submitted", func() bool { return len(fake.Submitted(agent)) == 1 })
	if got := fake.Submitted(agent); got[0] != "Review the diff" {
		t.Fatalf("submitted %q", got)
	}
	a, err = c.AgentWait(ctx, "reviewer", nil, 5*time.Second)
	if err != nil || !Ready(a.AgentStatus) || a.StateChangeSeq <= seq {
		t.Fatalf("agent.wait %+v %v", a, err)
	}
	if err := c.AgentSendKeys(ctx, "reviewer", "esc"); err != nil {
		t.Fatal(err)
	}

	root, err := c.TabCreate(ctx, "", "/work", "worker", map[string]string{"ROLE": "worker"})
	if err != nil || root.PaneID == "" || root.Cwd != "/work" {
		t.Fatalf("tab.create %+v %v", root, err)
	}
	if st := fake.Pane(root.PaneID); st.Env["ROLE"] != "worker" {
		t.Fatalf("tab.create env %+v", st)
	}
	tc := requests(t, fake, "tab.create")
	if tc[0]["focus"] != false || tc[0]["label"] != "worker" {
		t.Fatalf("tab.create params %v", tc[0])
	}
	started, err := c.AgentStart(ctx, "coder", "claude", root.PaneID, []string{"--model", "opus"}, 30*time.Second)
	if err != nil || started.Name != "coder" || started.PaneID != root.PaneID || !started.LaunchPending {
		t.Fatalf("agent.start %+v %v", started, err)
	}
	eventually(t, 2*time.Second, "agent ready", func() bool {
		a, err := c.AgentGet(ctx, "coder")
		return err == nil && a.InteractiveReady && Ready(a.AgentStatus)
	})

	pane, err := c.LayoutApplyCommand(ctx, "", "job", "/repo", []string{"my-agent", "--flag"}, map[string]string{"HERDR_AGENT": "claude"})
	if err != nil || pane == "" {
		t.Fatalf("layout.apply %q %v", pane, err)
	}
	if st := fake.Pane(pane); !slices.Equal(st.Command, []string{"my-agent", "--flag"}) || st.Label != "job" || st.Cwd != "/repo" || st.Env["HERDR_AGENT"] != "claude" {
		t.Fatalf("layout pane %+v", st)
	}
	eventually(t, 2*time.Second, "hinted agent detected", func() bool {
		a, err := c.AgentGet(ctx, pane)
		return err == nil && a.Agent == "claude" && Ready(a.AgentStatus)
	})

	if err := c.PaneClose(ctx, shell); err != nil {
		t.Fatal(err)
	}
	if !fake.Pane(shell).Closed {
		t.Fatal("pane.close did not close")
	}
}

func TestClientTypedErrors(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))
	ctx := t.Context()
	shell := fake.AddPane(herdrtest.PaneOptions{})
	agent := fake.AddAgent(herdrtest.PaneOptions{Name: "reviewer"})
	const gone = "w1:pZ"

	_, err := c.PaneGet(ctx, gone)
	wantIs(t, err, ErrPaneNotFound)
	var he *Error
	if !errors.As(err, &he) || he.Method != "pane.get" || he.Code != "pane_not_found" || !strings.Contains(err.Error(), gone) {
		t.Fatalf("error %#v", err)
	}
	if errors.Is(err, ErrAgentNotFound) || errors.Is(err, ErrUnknownMethod) {
		t.Fatalf("%v matches the wrong sentinels", err)
	}
	_, err = c.PaneRead(ctx, gone, SourceVisible, 0)
	wantIs(t, err, ErrPaneNotFound)
	wantIs(t, c.PaneSendInput(ctx, gone, "x"), ErrPaneNotFound)
	wantIs(t, c.PaneSendKeys(ctx, gone, "enter"), ErrPaneNotFound)
	wantIs(t, c.PaneClose(ctx, gone), ErrPaneNotFound)

	_, err = c.AgentGet(ctx, "nobody")
	wantIs(t, err, ErrAgentNotFound)
	_, err = c.AgentGet(ctx, shell) // a pane without an agent
	wantIs(t, err, ErrAgentNotFound)
	_, err = c.AgentPrompt(ctx, "nobody", "hi")
	wantIs(t, err, ErrAgentNotFound)
	_, err = c.AgentWait(ctx, "nobody", nil, time.Second)
	wantIs(t, err, ErrAgentNotFound)
	wantIs(t, c.AgentSendKeys(ctx, "nobody", "enter"), ErrAgentNotFound)
	_, err = c.AgentPrompt(ctx, agent, "")
	wantIs(t, err, ErrEmptyPrompt)

	// agent.wait's own timeout answers "timeout".
	start := time.Now()
	_, err = c.AgentWait(ctx, agent, []string{StatusWorking}, 200*time.Millisecond)
	wantIs(t, err, ErrTimeout)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}

	// A blocked agent is refused and nothing is typed into its dialog.
	fake.SetBlocked(agent, true)
	_, err = c.AgentPrompt(ctx, "reviewer", "hi")
	wantIs(t, err, ErrAgentBlocked)
	if d := fake.TypedIntoDialog(agent); len(d) != 0 {
		t.Fatalf("typed into the dialog: %q", d)
	}
	fake.SetBlocked(agent, false)

	_, err = c.AgentStart(ctx, "reviewer", "claude", shell, nil, 0)
	wantIs(t, err, ErrAgentNameTaken)
	_, err = c.AgentStart(ctx, "x", "vim", shell, nil, 0)
	wantIs(t, err, ErrUnsupportedKind)
	_, err = c.AgentStart(ctx, "x", "claude", agent, nil, 0)
	wantIs(t, err, ErrAgentPaneBusy)
	_, err = c.LayoutApplyCommand(ctx, "wZ", "", "", []string{"x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "workspace_not_found") {
		t.Fatalf("layout.apply in a missing workspace: %v", err)
	}
}

func TestClientProtocol16(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithProtocol(16))
	ctx := t.Context()
	agent := fake.AddAgent(herdrtest.PaneOptions{})

	ok, err := c.HasAgentPrompt(ctx)
	if err != nil || ok {
		t.Fatalf("HasAgentPrompt = %v, %v on protocol 16", ok, err)
	}
	_, err = c.AgentPrompt(ctx, agent, "hi")
	wantIs(t, err, ErrUnknownMethod)
	wantIs(t, err, ErrInvalidRequest)
	if !strings.Contains(err.Error(), "agent.prompt") {
		t.Fatalf("error does not name the method: %v", err)
	}
	_, err = c.AgentWait(ctx, agent, nil, time.Second)
	wantIs(t, err, ErrUnknownMethod)
	wantIs(t, c.AgentSendKeys(ctx, agent, "enter"), ErrUnknownMethod)
	// The fallback works: pane.send_input plus polling.
	if err := c.PaneSendInput(ctx, agent, "hi", "enter"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "fallback submitted", func() bool { return len(fake.Submitted(agent)) == 1 })
	// A method the old server has is not "unknown".
	_, err = c.PaneGet(ctx, "w1:pZ")
	if errors.Is(err, ErrUnknownMethod) {
		t.Fatalf("pane_not_found taken for an unknown method: %v", err)
	}
}

func TestProtocolCached(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t)
	ctx := t.Context()
	for range 5 {
		if p, err := c.Protocol(ctx); err != nil || p != 20 {
			t.Fatalf("protocol %d %v", p, err)
		}
		if ok, err := c.HasAgentPrompt(ctx); err != nil || !ok {
			t.Fatalf("HasAgentPrompt %v %v", ok, err)
		}
	}
	if n := len(requests(t, fake, "ping")); n != 1 {
		t.Fatalf("%d pings for 10 protocol checks, want 1", n)
	}
	// A failed ping is not cached.
	c2 := &Client{Path: fake.SocketPath()}
	fake.DropNextReply("ping")
	if _, err := c2.Protocol(ctx); err == nil {
		t.Fatal("dropped ping gave a protocol")
	}
	if p, err := c2.Protocol(ctx); err != nil || p != 20 {
		t.Fatalf("protocol after a failed ping: %d %v", p, err)
	}
}

func TestClientConcurrentCalls(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t)
	fake.AddPane(herdrtest.PaneOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			if _, err := c.PaneList(t.Context()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ids := map[string]bool{}
	for _, l := range fake.Requests() {
		var r struct{ ID string }
		_ = json.Unmarshal([]byte(l), &r)
		if ids[r.ID] {
			t.Fatalf("request id %q reused", r.ID)
		}
		ids[r.ID] = true
	}
}

func TestSocketPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cases := []struct {
		sockPath, session, xdg string
		want                   string
		bad                    bool
	}{
		{want: filepath.Join(home, ".config/herdr/herdr.sock")},
		{xdg: "/xdg", want: "/xdg/herdr/herdr.sock"},
		{xdg: "/xdg", session: "work", want: "/xdg/herdr/sessions/work/herdr.sock"},
		{session: "a.b_c-9", want: filepath.Join(home, ".config/herdr/sessions/a.b_c-9/herdr.sock")},
		{xdg: "/xdg", session: "default", want: "/xdg/herdr/herdr.sock"},
		{sockPath: "/run/h.sock", session: "work", xdg: "/xdg", want: "/run/h.sock"}, // the raw path wins
		{sockPath: "/run/h.sock", session: "../evil", want: "/run/h.sock"},           // …and the session is not looked at
		{session: strings.Repeat("s", 64), xdg: "/x", want: "/x/herdr/sessions/" + strings.Repeat("s", 64) + "/herdr.sock"},
		{session: strings.Repeat("s", 65), bad: true},
		{session: "..", bad: true},
		{session: ".", bad: true},
		{session: "a/b", bad: true},
		{session: "../x", bad: true},
		{session: "sp ace", bad: true},
		{session: "ünï", bad: true},
	}
	for _, tc := range cases {
		t.Setenv("HERDR_SOCKET_PATH", tc.sockPath)
		t.Setenv("HERDR_SESSION", tc.session)
		t.Setenv("XDG_CONFIG_HOME", tc.xdg)
		got, err := SocketPath()
		switch {
		case tc.bad:
			if err == nil || !strings.Contains(err.Error(), "HERDR_SESSION") {
				t.Errorf("%+v: got %q, %v; want an error naming $HERDR_SESSION", tc, got, err)
			}
		case err != nil || got != tc.want:
			t.Errorf("%+v: got %q, %v; want %q", tc, got, err, tc.want)
		}
	}

	// The zero Client discovers the socket itself.
	fake := herdrtest.New(t)
	t.Setenv("HERDR_SOCKET_PATH", fake.SocketPath())
	if _, err := new(Client).Ping(t.Context()); err != nil {
		t.Fatalf("zero Client with $HERDR_SOCKET_PATH: %v", err)
	}
	t.Setenv("HERDR_SOCKET_PATH", "")
	t.Setenv("HERDR_SESSION", "no/such")
	if _, err := new(Client).Ping(t.Context()); err == nil || IsNotRunning(err) {
		t.Fatalf("invalid session: %v", err)
	}
	noViolations(t, fake)
}

func TestNotRunning(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "hbnr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	missing := filepath.Join(dir, "missing.sock")

	// A socket file nobody listens on: ECONNREFUSED.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()

	for _, tc := range []struct {
		path  string
		errno error
	}{{missing, syscall.ENOENT}, {stale, syscall.ECONNREFUSED}} {
		c := &Client{Path: tc.path}
		start := time.Now()
		_, err := c.Ping(t.Context())
		if !IsNotRunning(err) {
			t.Fatalf("%s: %v is not IsNotRunning", tc.path, err)
		}
		var nr *NotRunningError
		if !errors.As(err, &nr) || nr.Path != tc.path || !errors.Is(err, tc.errno) {
			t.Fatalf("%s: %#v", tc.path, err)
		}
		msg := err.Error()
		for _, want := range []string{"not running", tc.path, "`herdr`", "herdr server", "HERDR_SOCKET_PATH"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("not-running took %v", d)
		}
		if _, err := c.Subscribe(t.Context(), []map[string]any{{"type": "pane.closed"}}); !IsNotRunning(err) {
			t.Fatalf("subscribe: %v", err)
		}
	}
	if IsNotRunning(errors.New("x")) || IsNotRunning(nil) {
		t.Fatal("IsNotRunning of other errors")
	}
}

func TestBadReplies(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t)
	ctx := t.Context()
	fake.AddPane(herdrtest.PaneOptions{})

	fake.GarbleNextReply("pane.list")
	_, err := c.PaneList(ctx)
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Method != "pane.list" || !strings.Contains(err.Error(), "pane.list") {
		t.Fatalf("garbled reply: %#v", err)
	}

	for _, tc := range []struct {
		name, raw string // %s: the id of the next request
	}{
		{"wrong id", `{"id":"someone-else","result":{"type":"pane_list","panes":[]}}` + "\n"},
		{"wrong type", `{"id":"%s","result":{"type":"ok"}}` + "\n"},
		{"no newline", `{"id":"%s","result":{"type":"pane_list","panes":[]}}`},
		{"empty", ""},
	} {
		raw := strings.ReplaceAll(tc.raw, "%s", "hb-"+strconv.FormatUint(c.seq.Load()+1, 10))
		fake.InjectFault("pane.list", herdrtest.Fault{Raw: []byte(raw)})
		_, err := c.PaneList(ctx)
		if err == nil || !strings.Contains(err.Error(), "pane.list") {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.name == "wrong id" || tc.name == "wrong type" {
			if !errors.As(err, &pe) {
				t.Fatalf("%s: %#v is not a ProtocolError", tc.name, err)
			}
		}
	}
	fake.DropNextReply("pane.get")
	if _, err := c.PaneGet(ctx, "w1:p1"); err == nil || errors.As(err, new(*Error)) {
		t.Fatalf("dropped reply: %v", err)
	}
	// Afterwards the client still works.
	if _, err := c.PaneList(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDelayedReplyRespectsDeadline(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t)
	fake.AddPane(herdrtest.PaneOptions{})

	fake.DelayNextReply("pane.list", 3*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.PaneList(ctx)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("call outlived its deadline: %v", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pane.list") {
		t.Fatalf("err %v", err)
	}

	// Without a context deadline, Client.Timeout bounds the call.
	c.Timeout = 200 * time.Millisecond
	fake.DelayNextReply("pane.list", 3*time.Second)
	start = time.Now()
	_, err = c.PaneList(context.Background())
	if d := time.Since(start); d > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Timeout: %v after %v", err, time.Since(start))
	}
}

func TestCancelAgentWaitClosesCleanly(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))
	agent := fake.AddAgent(herdrtest.PaneOptions{Status: StatusWorking})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.AgentWait(ctx, agent, []string{StatusIdle, StatusDone}, 10*time.Second)
		done <- err
	}()
	eventually(t, 2*time.Second, "agent.wait arrives", func() bool { return len(requests(t, fake, "agent.wait")) == 1 })
	time.Sleep(150 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("AgentWait did not return on cancel")
	}
	eventually(t, 2*time.Second, "server sees the client go", func() bool { return fake.Aborted() == 1 })

	// A wait cut by the context's deadline ends the same way.
	dctx, dcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer dcancel()
	_, err := c.AgentWait(dctx, agent, nil, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	eventually(t, 2*time.Second, "second abort", func() bool { return fake.Aborted() == 2 })
	for _, a := range fake.Aborts() {
		if a.Method != "agent.wait" || a.Reason != "eof" {
			t.Fatalf("abort %+v: the client must close, never write extra bytes", a)
		}
	}
}

func TestRequestSizeLimit(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t)
	ctx := t.Context()
	pane := fake.AddPane(herdrtest.PaneOptions{})

	// size is the line Call would send for a text of n bytes, newline included.
	size := func(n int) int {
		line, err := json.Marshal(request{ID: "hb-" + strconv.FormatUint(c.seq.Load()+1, 10), Method: "pane.send_input",
			Params: map[string]any{"pane_id": pane, "text": strings.Repeat("a", n)}})
		if err != nil {
			t.Fatal(err)
		}
		return len(line) + 1
	}
	n := MaxRequestBytes - size(0)
	if size(n) != MaxRequestBytes {
		t.Fatalf("size arithmetic: %d", size(n))
	}
	if err := c.PaneSendInput(ctx, pane, strings.Repeat("a", n)); err != nil {
		t.Fatalf("a request of exactly %d bytes: %v", MaxRequestBytes, err)
	}
	before := len(fake.Requests())
	err := c.PaneSendInput(ctx, pane, strings.Repeat("a", n+1))
	if err == nil || !strings.Contains(err.Error(), "limit") || !strings.Contains(err.Error(), "pane.send_input") {
		t.Fatalf("oversized request: %v", err)
	}
	// Escaping counts: 200k quotes become 400k bytes on the wire.
	if err := c.PaneSendInput(ctx, pane, strings.Repeat(`"`, MaxRequestBytes/2)); err == nil {
		t.Fatal("escaped oversized request sent")
	}
	if len(fake.Requests()) != before || fake.Dropped() != 0 {
		t.Fatalf("an oversized request reached the server (requests %d→%d, dropped %d)", before, len(fake.Requests()), fake.Dropped())
	}
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))
	var logs testlog.Buffer
	c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	old := fake.AddPane(herdrtest.PaneOptions{})
	fake.ClosePane(old) // history the subscription replays
	agent := fake.AddAgent(herdrtest.PaneOptions{})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := c.Subscribe(ctx, []map[string]any{{"type": "pane.agent_status_changed", "pane_id": "w1:pZ"}})
	wantIs(t, err, ErrPaneNotFound)

	sub, err := c.Subscribe(ctx, []map[string]any{
		{"type": "pane.created"}, {"type": "pane.closed"},
		{"type": "pane.agent_status_changed", "pane_id": agent},
	})
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) Event {
		t.Helper()
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("stream ended waiting for %s: %v", what, sub.Err())
			}
			return ev
		case <-time.After(3 * time.Second):
			t.Fatalf("no %s", what)
		}
		return Event{}
	}
	// The replayed history is delivered as it comes: 2 pane_created, the
	// old pane_closed (reconciling is the consumer's job).
	replayed := map[string][]string{}
	for range 3 {
		ev := next("replayed event")
		replayed[ev.Name] = append(replayed[ev.Name], ev.PaneID)
		if ev.Name == "pane_created" && (ev.Pane == nil || ev.Pane.PaneID != ev.PaneID) {
			t.Fatalf("pane_created without its pane: %+v", ev)
		}
	}
	if !slices.Equal(replayed["pane_created"], []string{old, agent}) || !slices.Equal(replayed["pane_closed"], []string{old}) {
		t.Fatalf("replayed %v", replayed)
	}

	// A garbage line is skipped (and logged); the stream goes on.
	fake.SendRawEvent([]byte(`{"event":"pane_closed","data":`))
	fake.SendRawEvent([]byte(`not json at all`))
	fake.SetStatus(agent, StatusWorking)
	ev := next("status event")
	if ev.Name != "pane.agent_status_changed" || ev.PaneID != agent || ev.AgentStatus != StatusWorking || len(ev.Raw) == 0 {
		t.Fatalf("status event %+v", ev)
	}
	if l := logs.String(); strings.Count(l, "does not parse") != 2 {
		t.Fatalf("skipped lines not logged: %q", l)
	}
	fake.SetStatus(agent, StatusIdle)
	if ev := next("idle"); ev.AgentStatus != StatusIdle {
		t.Fatalf("event %+v", ev)
	}
	p := fake.AddPane(herdrtest.PaneOptions{})
	if ev := next("pane_created"); ev.Name != "pane_created" || ev.PaneID != p {
		t.Fatalf("event %+v", ev)
	}
	fake.ClosePane(p)
	if ev := next("pane_closed"); ev.Name != "pane_closed" || ev.PaneID != p {
		t.Fatalf("event %+v", ev)
	}

	// Cancelling ends the stream: C closes, Err stays nil, herdr sees EOF.
	cancel()
	select {
	case _, ok := <-sub.C:
		for ok {
			_, ok = <-sub.C
		}
	case <-time.After(time.Second):
		t.Fatal("C not closed after cancel")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err after cancel: %v", err)
	}
	eventually(t, 2*time.Second, "server sees the subscriber go", func() bool {
		a := fake.Aborts()
		return len(a) == 1 && a[0].Method == "events.subscribe" && a[0].Reason == "eof"
	})
}

func TestSubscribeServerGone(t *testing.T) {
	t.Parallel()
	fake := herdrtest.New(t)
	c := &Client{Path: fake.SocketPath()}
	sub, err := c.Subscribe(t.Context(), []map[string]any{{"type": "pane.closed"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub.C:
		if ok {
			t.Fatal("event from a closed server")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("stream did not end with the server")
	}
	if err := sub.Err(); err == nil || !strings.Contains(err.Error(), "event stream ended") {
		t.Fatalf("Err %v", err)
	}
	noViolations(t, fake)
}

// TestErrorMessages pins the wording callers see for each error kind.
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	e := &Error{Method: "agent.prompt", Code: "agent_blocked", Message: "agent x is blocked"}
	if got := e.Error(); got != "herdr: agent.prompt: agent_blocked: agent x is blocked" {
		t.Fatal(got)
	}
	pe := &ProtocolError{Method: "ping", Msg: "reply is not JSON", Err: errors.New("eof")}
	if got := pe.Error(); got != "herdr: ping: bad reply: reply is not JSON: eof" || !errors.Is(pe, pe.Err) {
		t.Fatal(got)
	}
	if got := fmt.Sprint(ErrTimeout); got != "herdr: timeout" {
		t.Fatal(got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
