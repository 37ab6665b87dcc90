package store_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestSetDiskFullRefusesWrites: the fault hook refuses every kind of write
// with ENOSPC — a lazy request record (journal and commit both), a direct
// write, a group-committed one — keeps reads working, and is undone by
// SetDiskFull(false).
func TestSetDiskFullRefusesWrites(t *testing.T) {
	st, path := open(t, 0)
	kept := store.Request{GID: "g", ID: "before", Tool: "bridge_send", MsgID: "m0", Status: "confirmed", At: time.Now()}
	if err := st.PutRequestLazy(kept); err != nil {
		t.Fatal(err)
	}
	st.SetDiskFull(true)
	refused := store.Request{GID: "g", ID: "during", Tool: "bridge_send", MsgID: "m1", Status: "confirmed", At: time.Now()}
	for what, err := range map[string]error{
		"lazy request record": st.PutRequestLazy(refused),
		"request record":      st.PutRequest(refused),
		"dead letter":         st.AppendDead(store.DeadLetter{At: time.Now(), MsgID: "m1", Reason: "test"}),
		"entity":              st.PutEntity(store.Entity{GID: "g", Name: "n"}),
		"direct, held":        st.DropHeld("g"),
		"group-committed":     putHeldErr(st),
	} {
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s under a full disk: %v, want ENOSPC", what, err)
		}
	}
	if got, ok, err := st.GetRequest("g", "before"); err != nil || !ok || got.MsgID != "m0" {
		t.Fatalf("reading under a full disk: %+v %v %v", got, ok, err)
	}
	if _, ok, _ := st.GetRequest("g", "during"); ok {
		t.Fatal("a refused record is recorded")
	}
	st.SetDiskFull(false)
	if err := st.PutRequestLazy(refused); err != nil {
		t.Fatalf("with space back: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, id := range []string{"before", "during"} {
		if _, ok, err := again.GetRequest("g", id); err != nil || !ok {
			t.Fatalf("%s after reopening: %v %v", id, ok, err)
		}
	}
}

// TestPublishingRecordRoundTrips: the mark of an intent survives the
// journal and the commit.
func TestPublishingRecordRoundTrips(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := store.Request{GID: "g", ID: "i", Tool: "bridge_send", MsgID: "m", At: time.Now(), Publishing: true}
	if err := st.PutRequestLazy(r); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.GetRequest("g", "i"); !got.Publishing {
		t.Fatalf("pending: %+v", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, _, _ := st.GetRequest("g", "i"); !got.Publishing || got.MsgID != "m" {
		t.Fatalf("committed: %+v", got)
	}
}

// putHeldErr is a group-committed write's error (PruneRequests was one,
// until a prune with nothing to delete stopped writing).
func putHeldErr(st *store.Store) error {
	_, err := st.PutHeld([]store.HeldPut{{GID: "g", Env: []byte("x")}})
	return err
}
