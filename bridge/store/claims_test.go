package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestClaimsOneWinner: of a brief's queueing and its sender's give-up,
// whichever the store takes first wins and the other sees it decided; a
// give-up from another host binds nothing; both outlive a reopen and are
// pruned once their brief can no longer arrive.
func TestClaimsOneWinner(t *testing.T) {
	s, path := open(t, 0)
	until := time.Now().Add(time.Hour)
	queue := func(id, host string) error {
		q := store.QueuedBrief{Pane: "%1", To: "w", Env: []byte(id)}
		_, err := s.ClaimAndQueue(store.Claim{MsgID: id, Host: host, Until: until}, &q, "behind", 0)
		return err
	}
	giveUp := func(id, host string) (claimed, again bool) {
		claimed, again, err := s.GiveUp(store.Claim{MsgID: id, Host: host, Until: until})
		if err != nil {
			t.Fatal(err)
		}
		return claimed, again
	}
	// queued first: the give-up finds it claimed, and writes nothing
	if err := queue("m1", "a"); err != nil {
		t.Fatal(err)
	}
	if claimed, _ := giveUp("m1", "a"); !claimed {
		t.Error("a give-up after the brief was queued was not told it was claimed")
	}
	// given up first: the brief is refused, the give-up repeats as again
	if claimed, again := giveUp("m2", "a"); claimed || again {
		t.Errorf("first give-up: claimed %v again %v", claimed, again)
	}
	if err := queue("m2", "a"); !errors.Is(err, store.ErrGivenUp) {
		t.Errorf("a brief given up was queued: %v", err)
	}
	if _, again := giveUp("m2", "a"); !again {
		t.Error("a repeated give-up was not reported as again")
	}
	// another host's give-up does not bind a's brief
	if claimed, _ := giveUp("m3", "evil"); claimed {
		t.Fatal("claimed?")
	}
	if err := queue("m3", "a"); err != nil {
		t.Errorf("a brief was refused for another host's give-up: %v", err)
	}
	if qs, _ := s.QueuedFor("%1"); len(qs) != 2 {
		t.Errorf("%d briefs queued, want 2 (m1, m3)", len(qs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := queue("m2", "a"); !errors.Is(err, store.ErrGivenUp) {
		t.Errorf("after a reopen, a brief given up was queued: %v", err)
	}
	if n, err := s.PruneClaims(until.Add(time.Second)); err != nil || n != 3 {
		t.Errorf("pruned %d (%v), want 3", n, err)
	}
	if err := queue("m2", "a"); err != nil {
		t.Errorf("past its claim's Until, a brief is judged again: %v", err)
	}
}
