package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

func open(t *testing.T, dlqMax int) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.Open(path, dlqMax)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestOpenRefusesAForeignFileAndALockedOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, []byte("not a bbolt file, certainly not one of ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(path, 0); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("foreign file: %v", err)
	}
	s, lockedPath := open(t, 0)
	_ = s
	if _, err := store.Open(lockedPath, 0); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: %v", err)
	}
}

func TestEntitiesRoundTripAndRevoke(t *testing.T) {
	s, path := open(t, 0)
	e := store.Entity{GID: "g1", Name: "lead", Host: "h", Role: "primary", Groups: []string{"a"}, Registered: time.UnixMilli(1000).UTC(), Tokens: []string{"t1", "t2"}}
	if err := s.PutEntity(e); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEntity(store.Entity{GID: "g2", Name: "w", Host: "h", Role: "worker"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEntity("g2"); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadEntities()
	if err != nil || len(got) != 1 || got[0].Name != "lead" || len(got[0].Tokens) != 2 || got[0].Groups[0] != "a" {
		t.Fatalf("load: %+v %v", got, err)
	}
	s.Close()
	old, err := store.RevokeTokens(path, "lead")
	if err != nil || len(old.Tokens) != 2 {
		t.Fatalf("revoke: %+v %v", old, err)
	}
	if _, err := store.RevokeTokens(path, "nobody"); !errors.Is(err, store.ErrNoEntity) {
		t.Fatalf("revoke of an unknown name: %v", err)
	}
	if _, err := store.RevokeTokens(filepath.Join(t.TempDir(), "none.db"), "lead"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("revoke in a missing file: %v", err)
	}
	s2, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, _ = s2.LoadEntities()
	if len(got) != 1 || len(got[0].Tokens) != 0 {
		t.Fatalf("after revoke: %+v", got)
	}
}

func TestDeadLogKeepsTheNewest(t *testing.T) {
	s, _ := open(t, 3)
	for _, id := range []string{"m1", "m2", "m3", "m4", "m5"} {
		if err := s.AppendDead(store.DeadLetter{MsgID: id, Reason: "maxlen"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.DeadLetters(0)
	if err != nil || len(got) != 3 || got[0].MsgID != "m3" || got[2].MsgID != "m5" {
		t.Fatalf("dead log: %+v %v", got, err)
	}
	if got, _ := s.DeadLetters(2); len(got) != 2 || got[0].MsgID != "m4" {
		t.Fatalf("limit 2: %+v", got)
	}
}

func TestLedgerBuckets(t *testing.T) {
	s, _ := open(t, 0)
	a := store.Await{MsgID: "m1", From: "p", To: "w", Deadline: time.UnixMilli(5000).UTC()}
	if err := s.PutAwait(a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTyping(store.Await{MsgID: "m2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadAwaits(); len(got) != 1 || got[0] != a {
		t.Fatalf("awaits: %+v", got)
	}
	if err := s.DeleteAwait("m1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadAwaits(); len(got) != 0 {
		t.Fatalf("awaits after delete: %+v", got)
	}
	if got, _ := s.LoadTyping(); len(got) != 1 || got[0].MsgID != "m2" {
		t.Fatalf("typing: %+v", got)
	}
}

func TestMemoryPrunesWhatExpired(t *testing.T) {
	s, _ := open(t, 0)
	now := time.UnixMilli(1_000_000)
	live, dead := store.DigestSeen("live"), store.DigestSeen("dead")
	seen := []store.Seen{{Digest: live, Exp: now.Add(time.Hour)}, {Digest: dead, Exp: now.Add(-time.Second)}}
	senders := []store.Sender{{GID: "fresh", Host: "b", Seen: now}, {GID: "stale", Host: "b", Seen: now.Add(-48 * time.Hour)}}
	if err := s.SaveMemory(seen, senders, false, now, now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	gotSeen, gotSenders, err := s.LoadMemory(now, now.Add(-24*time.Hour), 10)
	if err != nil || len(gotSeen) != 1 || gotSeen[0].Digest != live || len(gotSenders) != 1 || gotSenders[0].GID != "fresh" {
		t.Fatalf("load filters: %+v %+v %v", gotSeen, gotSenders, err)
	}
	if err := s.SaveMemory(nil, nil, true, now, now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// pruned on disk: even a load that would accept them finds nothing
	gotSeen, gotSenders, _ = s.LoadMemory(time.UnixMilli(0), time.UnixMilli(0), 10)
	if len(gotSeen) != 1 || len(gotSenders) != 1 {
		t.Fatalf("after prune: %+v %+v", gotSeen, gotSenders)
	}
}
