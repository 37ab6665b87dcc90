package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

func TestTurnsRoundTripBothSidesAndPrune(t *testing.T) {
	s, path := open(t, 0)
	exp := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	asked := store.Turn{Owner: "w", Asked: true, TurnID: "t1", MsgID: "m1", Peer: "p", TraceID: "tr", ExpiresAt: exp,
		Status: "answered", Answer: &store.TurnAnswer{MsgID: "a1", From: "p", TS: exp.Add(-time.Minute), Body: []byte("postgres")}}
	got := store.Turn{Owner: "p", TurnID: "t1", MsgID: "m1", Peer: "w", ExpiresAt: exp, Answered: true}
	stale := store.Turn{Owner: "p", TurnID: "t2", MsgID: "m2", Peer: "w", ExpiresAt: exp.Add(-time.Hour), Missed: true}
	for _, r := range []store.Turn{asked, got, stale} {
		if err := s.PutTurn(r); err != nil {
			t.Fatal(err)
		}
	}
	// one turn, both sides on one host: two records, keyed apart
	all, err := s.LoadTurns(func(r store.Turn) bool { return r.TurnID != "t2" })
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || !reflect.DeepEqual(all[0], asked) || !reflect.DeepEqual(all[1], got) {
		t.Fatalf("loaded %+v", all)
	}
	if err := s.DeleteTurn(true, "w", "t1"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s2, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	left, err := s2.LoadTurns(func(store.Turn) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || !reflect.DeepEqual(left[0], got) {
		t.Fatalf("after delete and reopen: %+v, want only the received turn (the stale one was pruned)", left)
	}
}
