package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeListener fails Accept with each of errs in turn, then hands out
// the connections sent on conns until closed.
type fakeListener struct {
	mu     sync.Mutex
	errs   []error
	calls  int
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newFakeListener(errs ...error) *fakeListener {
	return &fakeListener{errs: errs, conns: make(chan net.Conn, 16), closed: make(chan struct{})}
}

func (l *fakeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "fake", Err: net.ErrClosed}
	}
}

func (l *fakeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

// countHandler counts log records by level.
type countHandler struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[slog.Level]int{}
	}
	h.n[r.Level]++
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }
func (h *countHandler) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[l]
}

func opErr(err error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", err)}
}

// A burst of accept errors (file handles exhausted, and errors no one
// classified as temporary) pauses the listener: the connection that comes
// after is served, the burst is logged once (and its end once), and only
// closing the listener ends Accept.
func TestSteadyListenerSurvivesAcceptErrors(t *testing.T) {
	var errs []error
	for range 6 {
		errs = append(errs, opErr(syscall.EMFILE))
	}
	errs = append(errs, opErr(syscall.ENFILE), opErr(syscall.ECONNABORTED), errors.New("something no one foresaw"))
	fake := newFakeListener(errs...)
	h := &countHandler{}
	l := newSteadyListener(fake, "test", 0, slog.New(h))

	for round := range 3 {
		a, b := net.Pipe()
		fake.conns <- a
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("round %d: Accept: %v", round, err)
		}
		if c != a {
			t.Fatalf("round %d: Accept returned another connection", round)
		}
		a.Close()
		b.Close()
		if round == 0 {
			fake.mu.Lock()
			fake.errs = append(fake.errs, opErr(syscall.EMFILE), opErr(syscall.EMFILE)) // a second burst
			fake.mu.Unlock()
		}
	}
	if got, want := fake.calls, len(errs)+2+3; got != want {
		t.Errorf("Accept calls on the listener = %d, want %d", got, want)
	}
	if got := h.count(slog.LevelError); got != 2 {
		t.Errorf("%d error lines for 2 bursts, want one per burst", got)
	}
	if got := h.count(slog.LevelWarn); got != 2 {
		t.Errorf("%d recovery lines for 2 bursts, want one per burst", got)
	}

	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

// Closing the listener during a burst of errors ends Accept without
// waiting for the burst to end.
func TestSteadyListenerCloseDuringBackoff(t *testing.T) {
	errs := make([]error, 1000)
	for i := range errs {
		errs[i] = opErr(syscall.EMFILE)
	}
	l := newSteadyListener(newFakeListener(errs...), "test", 0, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

// At the cap, Accept waits until a connection closes; Close ends the wait.
func TestSteadyListenerCap(t *testing.T) {
	fake := newFakeListener()
	l := newSteadyListener(fake, "test", 2, slog.New(slog.DiscardHandler))
	var held []net.Conn
	for range 3 {
		a, b := net.Pipe()
		defer b.Close()
		fake.conns <- a
	}
	for range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	third := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			third <- nil
			return
		}
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted at a cap of 2")
	case <-time.After(100 * time.Millisecond):
	}
	held[0].Close()
	held[0].Close() // a second Close gives nothing back twice
	select {
	case c := <-third:
		if c == nil {
			t.Fatal("Accept failed")
		}
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the freed slot was not taken")
	}
	if got := len(l.sem); got != 1 {
		t.Fatalf("%d slots held, want 1", got)
	}
	// at the cap again: Close ends a waiting Accept
	a, b := net.Pipe()
	defer b.Close()
	fake.conns <- a
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept waiting for a slot did not return after Close")
	}
}

func TestUIDCounter(t *testing.T) {
	u := uidCounter{max: 2}
	for i := range 2 {
		if ok, _ := u.take(7); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	ok, logN := u.take(7)
	if ok || logN != 1 {
		t.Fatalf("third take: ok=%v log=%d, want refused and logged", ok, logN)
	}
	if ok, logN := u.take(7); ok || logN != 0 {
		t.Fatalf("fourth take: ok=%v log=%d, want refused, not logged again", ok, logN)
	}
	if ok, _ := u.take(8); !ok {
		t.Fatal("another uid was refused")
	}
	u.put(7)
	if ok, _ := u.take(7); !ok {
		t.Fatal("a freed slot was refused")
	}
	if fmt.Sprint(u.n) != "map[7:2 8:1]" {
		t.Fatalf("counts %v", u.n)
	}
}

// The "net" settings load from config.json; zero fields take the defaults.
func TestNetConfigLoads(t *testing.T) {
	path := t.TempDir() + "/config.json"
	raw := `{"net": {"maxConns": 100, "idleTimeout": "5s", "socketMaxConnsPerUid": -1}}`
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Net.withDefaults()
	want := NetConfig{MaxConns: 100, IdleTimeout: Duration(5 * time.Second), ReadHeaderTimeout: Duration(DefaultReadHeaderTimeout),
		SocketMaxConns: DefaultSocketMaxConns, SocketMaxConnsPerUID: -1}
	if n != want {
		t.Fatalf("loaded %+v, want %+v", n, want)
	}
}
