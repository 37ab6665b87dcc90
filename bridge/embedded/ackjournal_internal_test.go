package embedded

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// FuzzDecodeAck: a journal payload that is not an ack record is refused,
// never a panic; one that decodes encodes back to the same bytes.
func FuzzDecodeAck(f *testing.F) {
	f.Add(encodeAck(ackRec{gid: uuid.NewString(), seq: 7}))
	f.Add([]byte{0, 200, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		r, ok := decodeAck(p)
		if ok && !bytes.Equal(encodeAck(r), p) {
			t.Fatalf("%x decodes to %+v, which encodes differently", p, r)
		}
	})
}

// lazyHarness is a transport with one inbox and a consumer that hands its
// deliveries to a channel.
type lazyHarness struct {
	t    *testing.T
	path string
	tr   *Transport
	gid  string
	got  chan bridge.Delivery
	sub  bridge.Subscription
}

func openLazy(t *testing.T, path, gid string) *lazyHarness {
	t.Helper()
	return openLazyWith(t, path, gid, Options{})
}

func openLazyWith(t *testing.T, path, gid string, opts Options) *lazyHarness {
	t.Helper()
	tr, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := &lazyHarness{t: t, path: path, tr: tr, gid: gid, got: make(chan bridge.Delivery, 16)}
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	h.sub, err = tr.Consume(context.Background(), gid, 8, func(d bridge.Delivery) { h.got <- d })
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *lazyHarness) publish(body string) {
	h.t.Helper()
	now := time.Now()
	e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
		From: uuid.NewString(), To: h.gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
	if err := h.tr.Publish(context.Background(), h.gid, e, true); err != nil {
		h.t.Fatal(err)
	}
}

func (h *lazyHarness) next() bridge.Delivery {
	h.t.Helper()
	select {
	case d := <-h.got:
		return d
	case <-time.After(5 * time.Second):
		h.t.Fatal("no delivery")
		return bridge.Delivery{}
	}
}

// quiet reports no delivery within a short while (a redelivery that
// should not happen would come at once: the consumer starts at the head).
func (h *lazyHarness) quiet() {
	h.t.Helper()
	select {
	case d := <-h.got:
		h.t.Fatalf("delivered again: %s %q", d.Env.MsgID, d.Env.Body)
	case <-time.After(300 * time.Millisecond):
	}
}

// crash stops the transport the way a kill -9 does: nothing pending is
// committed, the files are just closed.
func (h *lazyHarness) crash() {
	t := h.tr
	t.mu.Lock()
	t.closed = true
	close(t.stop)
	t.mu.Unlock()
	h.sub.Cancel()
	t.wg.Wait()
	t.pmu.Lock()
	t.toApply, t.pend.recs = nil, nil // what a kill -9 leaves: journaled, not committed
	t.pmu.Unlock()
	t.stopWriter()
	t.closeJournals()
	t.db.Close()
}

// An ack journaled and not yet committed survives a process crash: the
// message is not delivered again after a restart.
func TestJournaledAckSurvivesCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	h.publish("one")
	d := h.next()
	if err := d.Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	if n := h.tr.pendingCount(gid); n != 1 {
		t.Fatalf("pending %d right after the ack, want 1 (journaled, not committed)", n)
	}
	if d := h.tr.Depth(gid); d != 0 {
		t.Fatalf("depth %d after the ack, want 0", d)
	}
	h.crash()
	if fi, err := os.Stat(path + ackJournalSuffix); err != nil || fi.Size() == 0 {
		t.Fatalf("journal after the crash: %v %v", fi, err)
	}
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	h2.quiet()
	if fi, _ := os.Stat(path + ackJournalSuffix); fi.Size() != 0 {
		t.Fatalf("journal holds %d bytes after its replay", fi.Size())
	}
}

// A journal lost with an OS crash only brings the message back: at least
// once, never lost.
func TestLostJournalRedelivers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	h.publish("one")
	if err := h.next().Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	h.crash()
	if err := os.Truncate(path+ackJournalSuffix, 5); err != nil { // the unsynced tail lost, torn
		t.Fatal(err)
	}
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	if d := h2.next(); string(d.Env.Body) != "one" {
		t.Fatalf("redelivered %q", d.Env.Body)
	}
}

// Journaled acks and publishes are committed together within
// journalApplyDelay, with no write to carry them; then both journals empty.
func TestJournaledAcksAreCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	defer h.tr.Close()
	h.publish("one")
	if err := h.next().Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	h.publish("two")
	if err := h.next().Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.tr.pendingCount(gid) != 0 || h.tr.pendingPublishes() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("journaled acks or publishes with no write after them were never committed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, name := range []string{ackJournalSuffix, pubJournalSuffix + "0", pubJournalSuffix + "1"} {
		if fi, _ := os.Stat(path + name); fi.Size() != 0 {
			t.Fatalf("journal %s holds %d bytes with nothing pending", name, fi.Size())
		}
	}
	if d := h.tr.Depth(gid); d != 0 {
		t.Fatalf("depth %d after both acks, want 0", d)
	}
}

// An inbox deleted and declared again numbers on from where it was, so a
// journaled ack of its earlier life never names a new message.
func TestRedeclaredInboxNeverReusesSequences(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	gid := uuid.NewString()
	h := openLazy(t, path, gid)
	h.publish("old")
	if err := h.next().Acker.Ack(); err != nil {
		t.Fatal(err)
	}
	h.sub.Cancel()
	if err := h.tr.DeleteInbox(context.Background(), gid); err != nil {
		t.Fatal(err)
	}
	tr := h.tr
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 100}); err != nil {
		t.Fatal(err)
	}
	h.sub, _ = tr.Consume(context.Background(), gid, 8, func(d bridge.Delivery) { h.got <- d })
	h.publish("new")
	if d := h.next(); string(d.Env.Body) != "new" {
		t.Fatalf("got %q", d.Env.Body)
	}
	h.crash()
	h2 := openLazy(t, path, gid)
	defer h2.tr.Close()
	if d := h2.next(); string(d.Env.Body) != "new" { // unacked: back after the restart, not deleted by the old ack
		t.Fatalf("got %q", d.Env.Body)
	}
}
