package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
	"github.com/herdbridge/herdbridge/internal/storedamage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string, opts embedded.Options) *embedded.Transport {
	t.Helper()
	tr, err := embedded.Open(path, opts)
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport {
			return open(t, filepath.Join(t.TempDir(), "bridge.db"), embedded.Options{})
		},
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			path := old.(*embedded.Transport).Path()
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, path, embedded.Options{})
		},
		// in-process delivery takes microseconds; a short watch keeps the
		// suite fast without making it flaky (a slow machine can only make
		// a "nothing more arrives" check pass, never fail)
		Grace: 100 * time.Millisecond,
		// each subtest has its own store file
		Parallel: true,
	})
}

func TestCorruptFileRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 64<<10)
	for i := range noise {
		noise[i] = byte(rng.UintN(256))
	}
	for name, content := range map[string][]byte{
		"short text":   []byte("this is not a bbolt file\n"),
		"random bytes": noise,
		"zero pages":   make([]byte, 32<<10),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bridge.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 { // and refused the same way again: nothing was "repaired"
				tr, err := embedded.Open(path, embedded.Options{})
				if err == nil {
					tr.Close()
					t.Fatal("Open of a corrupt file succeeded")
				}
				msg := err.Error()
				if !strings.Contains(msg, path) {
					t.Errorf("error does not name the file %s: %v", path, err)
				}
				if !strings.Contains(msg, "nothing was deleted") {
					t.Errorf("error does not say nothing was deleted: %v", err)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, content) {
				t.Errorf("the corrupt file was modified (%d bytes before, %d after)", len(content), len(after))
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("state dir holds %v, want only bridge.db", names)
			}
		})
	}
}

func TestLockedByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bridge.db")
	first := open(t, path, embedded.Options{})
	start := time.Now()
	second, err := embedded.Open(path, embedded.Options{})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a store in use succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("second Open took %v to fail", el)
	}
	if !strings.Contains(err.Error(), "locked by another process") || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v, want it to name %s and say it is locked by another process", err, path)
	}
	// the first is unharmed
	ctx := context.Background()
	gid := uuid.NewString()
	if err := first.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatalf("first transport after the refused Open: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// and once it is closed, the store opens
	open(t, path, embedded.Options{})
}

func env(t *testing.T, to, body string) *bridge.Envelope {
	t.Helper()
	ts := time.UnixMilli(time.Now().UnixMilli())
	e := &bridge.Envelope{
		V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(),
		To: to, Host: "h1", TS: ts, ExpiresAt: ts.Add(time.Minute), Body: []byte(body),
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDLQCapDropsOldest(t *testing.T) {
	tr := open(t, filepath.Join(t.TempDir(), "bridge.db"), embedded.Options{DLQMax: 3})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{MaxLength: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, gid, env(t, gid, "kept"), true); err != nil {
		t.Fatal(err)
	}
	var overflow []string
	for i := range 5 {
		e := env(t, gid, "over "+string(rune('a'+i)))
		if err := tr.Publish(ctx, gid, e, true); !errors.Is(err, bridge.ErrInboxFull) {
			t.Fatalf("publish %d over the cap: %v, want ErrInboxFull", i, err)
		}
		overflow = append(overflow, e.MsgID)
	}
	var (
		mu  sync.Mutex
		got []string
	)
	done := make(chan struct{})
	sub, err := tr.ConsumeDeadLetters(ctx, func(dl bridge.DeadLetter) {
		mu.Lock()
		got = append(got, dl.MsgID)
		if len(got) == 3 {
			close(done)
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("dead letters did not arrive")
	}
	time.Sleep(100 * time.Millisecond) // no fourth
	mu.Lock()
	defer mu.Unlock()
	if want := overflow[2:]; !equal(got, want) {
		t.Errorf("dead-letter queue holds %v, want the newest three %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMalformedEnvelopeDeadLettered: a record that does not decode as a
// valid envelope (here: one the transport was handed unvalidated) reaches the
// consumer with Err set (never dropped quietly); rejected, it is
// dead-lettered rather than wedging the inbox, and what follows it is
// delivered.
func TestMalformedEnvelopeDeadLettered(t *testing.T) {
	tr := open(t, filepath.Join(t.TempDir(), "bridge.db"), embedded.Options{})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	bad := env(t, gid, "bad")
	bad.MsgID = "not-a-uuid"
	good := env(t, gid, "good")
	for _, e := range []*bridge.Envelope{bad, good} {
		if err := tr.Publish(ctx, gid, e, true); err != nil {
			t.Fatal(err)
		}
	}
	dead := make(chan bridge.DeadLetter, 1)
	dsub, err := tr.ConsumeDeadLetters(ctx, func(dl bridge.DeadLetter) { dead <- dl })
	if err != nil {
		t.Fatal(err)
	}
	defer dsub.Cancel()
	got := make(chan *bridge.Envelope, 2)
	var acks sync.WaitGroup
	defer acks.Wait()
	sub, err := tr.Consume(ctx, gid, 1, func(d bridge.Delivery) {
		if d.Env == nil {
			if d.Err == nil || d.ID != "not-a-uuid" {
				t.Errorf("undecodable delivery: err %v, id %q", d.Err, d.ID)
			}
			acks.Go(func() { _ = d.Acker.Reject(bridge.ReasonRejected + ": " + d.Err.Error()) })
			return
		}
		got <- d.Env
		acks.Go(func() { _ = d.Acker.Ack() })
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	select {
	case e := <-got:
		if e.MsgID != good.MsgID {
			t.Errorf("delivered %s, want the well-formed %s", e.MsgID, good.MsgID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the well-formed message behind a malformed one was not delivered")
	}
	select {
	case dl := <-dead:
		if dl.MsgID != "not-a-uuid" || dl.Env != nil || !strings.HasPrefix(dl.Reason, bridge.ReasonRejected+": ") {
			t.Errorf("dead letter = %q, env %v, reason %q", dl.MsgID, dl.Env, dl.Reason)
		}
		if err := dl.Acker.Ack(); err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the malformed message was not dead-lettered")
	}
}

// TestDepthCountsStored: Depth (metrics) follows publishes and settles.
func TestDepthCountsStored(t *testing.T) {
	tr := open(t, filepath.Join(t.TempDir(), "bridge.db"), embedded.Options{})
	ctx := context.Background()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tr.Publish(ctx, gid, env(t, gid, string(rune('a'+i))), true); err != nil {
			t.Fatal(err)
		}
	}
	if d := tr.Depth(gid); d != 3 {
		t.Fatalf("Depth = %d, want 3", d)
	}
	ds := make(chan bridge.Delivery, 3)
	sub, err := tr.Consume(ctx, gid, 3, func(d bridge.Delivery) { ds <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	for range 3 {
		d := <-ds
		if err := d.Acker.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if d := tr.Depth(gid); d != 0 {
		t.Fatalf("Depth after acks = %d, want 0", d)
	}
	if err := tr.DeleteInbox(ctx, gid); err != nil {
		t.Fatal(err)
	}
	if d := tr.Depth(gid); d != 0 {
		t.Fatalf("Depth after DeleteInbox = %d, want 0", d)
	}
}

// TestRepairEachDamage: every damage of transport.db is refused by Check
// and Open never panics on it; Repair keeps what is readable in a file that
// opens, with counters matching what was kept.
func TestRepairEachDamage(t *testing.T) {
	for _, kind := range storedamage.Kinds {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "transport.db")
			tr, err := embedded.Open(path, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			gid := uuid.NewString()
			if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 150; i++ {
				if err := tr.Publish(ctx, gid, env(t, gid, strings.Repeat("b", 300)), true); err != nil {
					t.Fatal(err)
				}
			}
			tr.Close()
			if err := storedamage.Apply(path, kind); err != nil {
				t.Fatal(err)
			}
			var de *store.DamageError
			if _, _, _, err := embedded.Check(path); !errors.As(err, &de) {
				t.Fatalf("check: %v", err)
			}
			r, err := embedded.Repair(path, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.String())
			if _, _, _, err := embedded.Check(path); err != nil {
				t.Fatalf("repaired: %v", err)
			}
			tr, err = embedded.Open(path, embedded.Options{})
			if err != nil {
				t.Fatalf("open the repaired store: %v", err)
			}
			defer tr.Close()
			if kind == "flipped-bytes" && (r.Kept["inbox"] == 0 || r.Kept["inbox"] >= 150) {
				t.Fatalf("kept %v", r.Kept)
			}
		})
	}
}
