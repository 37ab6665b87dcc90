package memnettest_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
	"github.com/herdbridge/herdbridge/keys"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// newKey is a host key of an outside host (trusted only where a test says).
func newKey(t *testing.T, host string) *keys.HostKey {
	t.Helper()
	k, _, err := keys.LoadOrCreate(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// drainUntil polls gid's held messages on h until one has body, and
// returns all it drained, in order.
func drainUntil(t *testing.T, h *memnettest.Host, gid, body string) []bridge.Message {
	t.Helper()
	var out []bridge.Message
	deadline := time.Now().Add(memnettest.Timeout)
	for time.Now().Before(deadline) {
		r, err := h.Core.Poll(ctx, gid, bridge.PollRequest{Wait: time.Second, Max: 500}, nil)
		if err != nil {
			t.Fatalf("poll on %s: %v", h.ID, err)
		}
		out = append(out, r.Messages...)
		if slices.ContainsFunc(r.Messages, func(m bridge.Message) bool { return m.Body == body }) {
			return out
		}
	}
	t.Fatalf("poll on %s: %q did not arrive (got %d others)", h.ID, body, len(out))
	return nil
}

// bodies are the bodies of ms.
func bodies(ms []bridge.Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Body)
	}
	return out
}

// wantUserError checks that err is a bridge.UserError mentioning each of
// want.
func wantUserError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	var ue *bridge.UserError
	if !errors.As(err, &ue) {
		t.Fatalf("%s: err = %v, want a user error", what, err)
	}
	for _, w := range want {
		if !strings.Contains(ue.Msg, w) {
			t.Errorf("%s: %q does not mention %q", what, ue.Msg, w)
		}
	}
}

// logWatch is a logger that closes seen when a record with message msg is
// logged: the only outside sign of some core steps.
type logWatch struct {
	msg  string
	seen chan struct{}
	once *sync.Once
}

func watchLog(msg string) *logWatch {
	return &logWatch{msg: msg, seen: make(chan struct{}), once: &sync.Once{}}
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg {
		w.once.Do(func() { close(w.seen) })
	}
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

func (w *logWatch) wait(t *testing.T) {
	t.Helper()
	select {
	case <-w.seen:
	case <-time.After(memnettest.Timeout):
		t.Fatalf("no log line %q", w.msg)
	}
}
