package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openStore(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// A start reads only the newest seen keys the set keeps, and a prune
// deletes exactly the expired ones.
func TestSeenKeysByExpiry(t *testing.T) {
	s, _ := openStore(t)
	now := time.UnixMilli(10_000_000)
	var seen []Seen
	for i := range 100 { // expiries now-50s … now+49s
		seen = append(seen, Seen{Digest: DigestSeen(fmt.Sprint("k", i)), Exp: now.Add(time.Duration(i-50) * time.Second)})
	}
	if err := s.SaveMemory(seen, nil, false, now, now); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.LoadMemory(now, now, 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("load: %d keys, %v", len(got), err)
	}
	for i, g := range got { // the ten latest expiries, oldest first
		if want := seen[90+i]; g != want {
			t.Fatalf("key %d: %+v, want %+v", i, g, want)
		}
	}
	if err := s.SaveMemory(nil, nil, true, now, now); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.LoadMemory(time.UnixMilli(0), now, 1000)
	if len(got) != 50 || got[0] != seen[50] { // a key expiring at now stays until past it
		t.Fatalf("after prune: %d keys, first %+v", len(got), got[0])
	}
}

func TestTakeOlderStopsAtTheFirstNewerKey(t *testing.T) {
	s, _ := openStore(t)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("t"))
		for i := range 10 {
			if err := b.Put(timeKey(uint64(i), []byte{byte(i)}), nil); err != nil {
				return err
			}
		}
		old, err := takeOlder(b, 4)
		if err != nil || len(old) != 4 || keyTime(old[3]) != 3 {
			return fmt.Errorf("took %d keys, %v", len(old), err)
		}
		n := 0
		_ = b.ForEach(func(k, v []byte) error { n++; return nil })
		if n != 6 {
			return fmt.Errorf("%d keys left, want 6", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A start reads the newest request records up to the book's bound; a
// prune forgets the old ones but keeps one an update made newer.
func TestRequestsByTime(t *testing.T) {
	s, _ := openStore(t)
	base := time.Unix(1_000_000, 0)
	for i := range 50 {
		r := Request{GID: "g", ID: fmt.Sprint("r", i), MsgID: fmt.Sprint("m", i), Status: "confirmed", At: base.Add(time.Duration(i) * time.Minute)}
		if err := s.PutRequest(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LoadRequests(base, 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("load: %d, %v", len(got), err)
	}
	for _, r := range got {
		if r.At.Before(base.Add(40 * time.Minute)) {
			t.Fatalf("load took an older record %s before a newer one", r.ID)
		}
	}
	if got, _ := s.LoadRequests(base.Add(45*time.Minute), 100); len(got) != 5 {
		t.Fatalf("since: %d records, want 5", len(got))
	}
	// r3 is updated with a later At: its first index entry is pruned, the
	// record stays
	if err := s.PutRequest(Request{GID: "g", ID: "r3", MsgID: "m3", Status: "injected", At: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneRequests(base.Add(20 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]bool{0: false, 19: false, 3: true, 20: true, 49: true} {
		if _, ok, _ := s.GetRequest("g", fmt.Sprint("r", i)); ok != want {
			t.Fatalf("r%d kept %v after the prune, want %v", i, ok, want)
		}
	}
}

// A state file written before the time-ordered keys opens with its seen
// keys and request records moved over.
func TestOpenMigratesTheOldLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	now := time.Now()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := Request{GID: "g", ID: "old", MsgID: "m1", At: now.Add(-25 * time.Hour)}
	fresh := Request{GID: "g", ID: "fresh", MsgID: "m2", At: now.Add(-time.Hour)}
	err = db.Update(func(tx *bolt.Tx) error {
		sb, _ := tx.CreateBucket(bktSeen)
		_ = sb.Put([]byte("gid1msg1"), binary.BigEndian.AppendUint64(nil, uint64(now.Add(time.Hour).UnixMilli())))
		_ = sb.Put([]byte("gid1msg0"), binary.BigEndian.AppendUint64(nil, uint64(now.Add(-time.Hour).UnixMilli())))
		rb, _ := tx.CreateBucket(bktRequests)
		for _, r := range []Request{old, fresh} {
			raw, _ := json.Marshal(r)
			_ = rb.Put(requestKey(r.GID, r.ID), raw)
		}
		return rb.Put([]byte("junk"), []byte("{"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen, _, _ := s.LoadMemory(now, now, 10)
	if len(seen) != 1 || seen[0].Digest != DigestSeen("gid1msg1") {
		t.Fatalf("seen keys after the move: %+v", seen)
	}
	if err := s.PruneRequests(now.Add(-24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ := s.LoadRequests(time.Time{}, 10)
	if len(got) != 1 || got[0].ID != "fresh" {
		t.Fatalf("requests after the move and a prune: %+v", got)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bktSeen) != nil || tx.Bucket(bktRequests).Get([]byte("junk")) != nil {
			t.Error("the old seen bucket or an unparsable record survived the move")
		}
		return nil
	})
}

// An index entry too short to name a record (a damaged or foreign one) is
// skipped by a start and dropped by a prune, never a panic.
func TestShortIndexEntryIsSkipped(t *testing.T) {
	s, _ := openStore(t)
	if err := s.PutRequest(Request{GID: "g", ID: "r", MsgID: "m", At: time.Unix(1_000, 0)}); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktRequestsByTime).Put([]byte{0, 1}, nil) })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadRequests(time.Time{}, 10); err != nil || len(got) != 1 {
		t.Fatalf("load: %+v %v", got, err)
	}
	if err := s.PruneRequests(time.Unix(2_000, 0)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadRequests(time.Time{}, 10); len(got) != 0 {
		t.Fatalf("after the prune: %+v", got)
	}
}
