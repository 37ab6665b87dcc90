package embedded_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// TestOutboxFIFOAndDurable: spooled messages come back oldest first, intact,
// after a reopen, and the counters follow Spool and Unspool.
func TestOutboxFIFOAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	tr, err := embedded.Open(path, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := uuid.NewString(), uuid.NewString()
	a, b := env(t, g1, "first"), env(t, g2, "second")
	a.Sig = []byte{1, 2, 3}
	if err := tr.Spool(g1, a, true, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Spool("broadcast.all", b, false, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := tr.OutboxLen(); n != 2 {
		t.Fatalf("OutboxLen = %d, want 2", n)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr = open(t, path, embedded.Options{})
	head, err := tr.OutboxHead()
	if err != nil || head == nil || head.Err != nil {
		t.Fatalf("head after reopen: %+v, %v", head, err)
	}
	if head.Key != g1 || !head.Mandatory || head.Env.MsgID != a.MsgID || string(head.Env.Body) != "first" || string(head.Env.Sig) != "\x01\x02\x03" {
		t.Fatalf("head = %+v (env %+v), want the first spooled", head, head.Env)
	}
	if err := tr.Unspool(head.Seq); err != nil {
		t.Fatal(err)
	}
	head, _ = tr.OutboxHead()
	if head == nil || head.Key != "broadcast.all" || head.Mandatory || head.Env.MsgID != b.MsgID {
		t.Fatalf("second head = %+v", head)
	}
	if err := tr.Unspool(head.Seq); err != nil {
		t.Fatal(err)
	}
	if err := tr.Unspool(head.Seq); err != nil { // twice: a no-op
		t.Fatal(err)
	}
	if head, _ := tr.OutboxHead(); head != nil {
		t.Fatalf("outbox not empty: %+v", head)
	}
	if n, bytes := tr.OutboxLen(); n != 0 || bytes != 0 {
		t.Fatalf("OutboxLen = %d, %d bytes; want 0, 0", n, bytes)
	}
}

// TestOutboxCaps: past its count or byte cap the outbox refuses.
func TestOutboxCaps(t *testing.T) {
	tr := open(t, filepath.Join(t.TempDir(), "t.db"), embedded.Options{})
	g := uuid.NewString()
	for i := 0; i < 3; i++ {
		if err := tr.Spool(g, env(t, g, "x"), true, 3, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Spool(g, env(t, g, "x"), true, 3, 0); !errors.Is(err, embedded.ErrOutboxFull) {
		t.Fatalf("fourth spool under a cap of 3: %v, want ErrOutboxFull", err)
	}
	_, bytes := tr.OutboxLen()
	if err := tr.Spool(g, env(t, g, "x"), true, 0, bytes+10); !errors.Is(err, embedded.ErrOutboxFull) {
		t.Fatalf("spool past the byte cap: %v, want ErrOutboxFull", err)
	}
	if err := tr.Spool(g, env(t, g, "x"), true, 0, 0); err != nil {
		t.Fatalf("no cap: %v", err)
	}
	if n, _ := tr.OutboxLen(); n != 4 {
		t.Fatalf("OutboxLen = %d, want 4", n)
	}
}
