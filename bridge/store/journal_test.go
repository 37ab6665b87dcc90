package store_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// FuzzDecodeRecords: whatever a journal file holds (a torn write, another
// program's bytes), decoding never panics, stops at the first bad record,
// and what it decodes frames back to exactly the valid bytes.
func FuzzDecodeRecords(f *testing.F) {
	good := store.AppendRecord(store.AppendRecord(nil, []byte("one")), []byte{})
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add([]byte{'J', 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		payloads, valid := store.DecodeRecords(raw)
		if valid > len(raw) {
			t.Fatalf("valid %d past the input (%d)", valid, len(raw))
		}
		var again []byte
		for _, p := range payloads {
			again = store.AppendRecord(again, p)
		}
		if !bytes.Equal(again, raw[:valid]) {
			t.Fatalf("re-framing %d records differs from the %d valid bytes", len(payloads), valid)
		}
	})
}

// A journal gives back what was appended, cuts a torn tail, and after a
// rewrite holds only what was kept.
func TestJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, got, torn, err := store.OpenJournal(path)
	if err != nil || len(got) != 0 || torn != 0 {
		t.Fatalf("new journal: %v %d %d", err, len(got), torn)
	}
	for _, p := range []string{"a", "bb", "ccc"} {
		if err := j.Append([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if err := os.Truncate(path, fi.Size()-2); err != nil { // the last record torn
		t.Fatal(err)
	}
	j, got, torn, err = store.OpenJournal(path)
	if err != nil || len(got) != 2 || string(got[1]) != "bb" || torn == 0 {
		t.Fatalf("reopened: %v %q torn %d", err, got, torn)
	}
	if err := j.Append([]byte("d")); err != nil { // after the cut tail
		t.Fatal(err)
	}
	if err := j.Rewrite([][]byte{[]byte("kept")}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, got, _, err = store.OpenJournal(path)
	if err != nil || len(got) != 1 || string(got[0]) != "kept" {
		t.Fatalf("after rewrite: %v %q", err, got)
	}
	j.Close()
}

// A request id recorded lazily survives a crashed process (its journal is
// replayed on open) and is committed to the state file within a moment.
func TestLazyRequestSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := store.Request{GID: "g", ID: "req-1", Tool: "bridge_send", MsgID: "m1", Status: "confirmed", At: time.Now()}
	if err := st.PutRequestLazy(r); err != nil {
		t.Fatal(err)
	}
	// a crash: the state file is left as it is, the journal holds the record
	raw, _ := os.ReadFile(path + ".journal")
	if len(raw) == 0 {
		t.Fatal("nothing journaled")
	}
	copyFile(t, path, filepath.Join(dir, "crashed.db"))
	copyFile(t, path+".journal", filepath.Join(dir, "crashed.db.journal"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := store.Open(filepath.Join(dir, "crashed.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	got, err := after.LoadRequests(time.Now().Add(-time.Hour), 1000)
	if err != nil || len(got) != 1 || got[0].MsgID != "m1" {
		t.Fatalf("after the crash: %+v %v", got, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// GetRequest finds a record journaled and not yet committed (its newest
// version), the same record once committed, and nothing for another id.
func TestGetRequestPendingAndCommitted(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := store.Request{GID: "g", ID: "req-1", Tool: "bridge_send", MsgID: "m1", Status: "confirmed", At: time.Now()}
	if err := st.PutRequestLazy(r); err != nil {
		t.Fatal(err)
	}
	r.Status = "injected"
	if err := st.PutRequestLazy(r); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := st.GetRequest("g", "req-1"); err != nil || !ok || got.Status != "injected" {
		t.Fatalf("pending: %+v %v %v", got, ok, err)
	}
	if err := st.Close(); err != nil { // commits what is pending
		t.Fatal(err)
	}
	st, err = store.Open(st.Path(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, ok, err := st.GetRequest("g", "req-1"); err != nil || !ok || got.MsgID != "m1" || got.Status != "injected" {
		t.Fatalf("committed: %+v %v %v", got, ok, err)
	}
	if _, ok, err := st.GetRequest("g", "req-2"); err != nil || ok {
		t.Fatalf("another id: found %v, %v", ok, err)
	}
}
