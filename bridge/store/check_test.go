package store_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/internal/storedamage"
)

// filled is a state file with entities and held messages over several
// pages, closed.
func filled(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := s.PutEntity(store.Entity{GID: fmt.Sprintf("g%d", i), Name: fmt.Sprintf("e%d", i), Registered: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	var puts []store.HeldPut
	for i := 0; i < n; i++ {
		puts = append(puts, store.HeldPut{GID: "g0", Env: []byte(fmt.Sprintf("message %04d %s", i, strings.Repeat("x", 300)))})
	}
	if _, err := s.PutHeld(puts); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckHealthyFile(t *testing.T) {
	path := filled(t, 200)
	fi, entities, err := store.Check(path)
	if err != nil {
		t.Fatal(err)
	}
	if entities != 3 || fi.Keys["held"] != 200 || fi.Empty() {
		t.Fatalf("entities %d, keys %v", entities, fi.Keys)
	}
	fi, _, err = store.Check(filepath.Join(t.TempDir(), "none.db"))
	if err != nil || !fi.Missing || !fi.Empty() {
		t.Fatalf("missing file: %+v %v", fi, err)
	}
}

// TestCheckRefusesEachDamage: every damage is a DamageError naming the file
// and the repair command; none panics or faults; Open refuses a
// zero-length file instead of silently starting an empty one.
func TestCheckRefusesEachDamage(t *testing.T) {
	for _, kind := range storedamage.Kinds {
		t.Run(kind, func(t *testing.T) {
			path := filled(t, 200)
			if err := storedamage.Apply(path, kind); err != nil {
				t.Fatal(err)
			}
			_, _, err := store.Check(path)
			var de *store.DamageError
			if !errors.As(err, &de) {
				t.Fatalf("check: %v, want a DamageError", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "herdbridge repair --state-dir "+filepath.Dir(path)) {
				t.Fatalf("error %q should name the file and the repair command", msg)
			}
			t.Log(msg)
			if kind == "zero-length" {
				if s, err := store.Open(path, 0); err == nil {
					s.Close()
					t.Fatal("Open started on a zero-length file")
				}
			}
		})
	}
}

// TestRepairEachDamage: repair keeps what is readable in a fresh file that
// checks healthy, keeps the damaged file aside unchanged, and says what it
// kept and lost.
func TestRepairEachDamage(t *testing.T) {
	for _, kind := range storedamage.Kinds {
		t.Run(kind, func(t *testing.T) {
			path := filled(t, 200)
			if err := storedamage.Apply(path, kind); err != nil {
				t.Fatal(err)
			}
			damaged, _ := os.ReadFile(path)
			now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
			r, err := store.Repair(path, now)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.String())
			if !r.Damaged || r.Aside != path+".damaged-20261201T060000Z" || len(r.Lost) == 0 {
				t.Fatalf("result %+v", r)
			}
			if aside, _ := os.ReadFile(r.Aside); string(aside) != string(damaged) {
				t.Fatal("the damaged file was not kept aside as it was")
			}
			fi, entities, err := store.Check(path)
			if err != nil {
				t.Fatalf("repaired file: %v", err)
			}
			if fi.Keys["held"] != r.Kept["held"] || entities != r.Kept["entities"] {
				t.Fatalf("repaired file holds %v, the report says %v", fi.Keys, r.Kept)
			}
			if kind == "flipped-bytes" && (r.Kept["held"] == 0 || r.Kept["held"] >= 200 || entities != 3) {
				t.Fatalf("one damaged page should lose a few held records only: kept %v", r.Kept)
			}
			s, err := store.Open(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			if err := s.EachHeld(func(string, uint64, []byte) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if n != r.Kept["held"] {
				t.Fatalf("%d held records readable, the report says %d", n, r.Kept["held"])
			}
			again, err := store.Repair(path, now)
			if err != nil || again.Damaged {
				t.Fatalf("a second repair: %+v %v", again, err)
			}
		})
	}
}
