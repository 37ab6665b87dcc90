package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestPaneQueueOrderAndTyping: each pane's queue keeps arrival order across
// panes whose ids prefix each other; a brief behind others is stored with
// what its sender is told; MarkTyped writes the typing record with it; the
// queue outlives a reopen.
func TestPaneQueueOrderAndTyping(t *testing.T) {
	s, path := open(t, 0)
	put := func(pane, env string) store.QueuedBrief {
		q := store.QueuedBrief{Pane: pane, To: "w", Env: []byte(env)}
		ahead, err := s.PutQueued(&q, "behind", 3)
		if err != nil {
			t.Fatal(err)
		}
		if (ahead > 0) != (q.Told == "behind") {
			t.Fatalf("%s: %d ahead, told %q", env, ahead, q.Told)
		}
		return q
	}
	a1 := put("w1:p1", "a1")
	put("w1:p10", "b1")
	put("w1:p1", "a2")
	put("w1:p1", "a3")
	if _, err := s.PutQueued(&store.QueuedBrief{Pane: "w1:p1", To: "w", Env: []byte("a4")}, "behind", 3); !errors.Is(err, store.ErrQueueFull) {
		t.Fatalf("a fourth brief for a queue bounded at 3: %v", err)
	}
	got, err := s.QueuedFor("w1:p1")
	if err != nil || len(got) != 3 || string(got[0].Env) != "a1" || string(got[2].Env) != "a3" || got[0].Told != "" || got[1].Told != "behind" {
		t.Fatalf("queue of w1:p1: %+v (%v)", got, err)
	}
	// the head of a pane is its oldest brief, not one of a pane whose id it prefixes
	if h, ok, err := s.QueueHead("w1:p1"); err != nil || !ok || string(h.Env) != "a1" {
		t.Fatalf("head of w1:p1: %+v %v %v", h, ok, err)
	}
	if h, ok, err := s.QueueHead("w1:p10"); err != nil || !ok || string(h.Env) != "b1" {
		t.Fatalf("head of w1:p10: %+v %v %v", h, ok, err)
	}
	if _, ok, err := s.QueueHead("w1:p2"); err != nil || ok {
		t.Fatalf("head of an empty queue: %v %v", ok, err)
	}
	if err := s.MarkTyped(a1, &store.Await{MsgID: "m-a1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteQueued(got[1]); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if panes, _ := s2.QueuedPanes(); len(panes) != 2 || panes[0] != "w1:p1" || panes[1] != "w1:p10" {
		t.Fatalf("panes %q", panes)
	}
	got, _ = s2.QueuedFor("w1:p1")
	if len(got) != 2 || !got[0].Typed || string(got[1].Env) != "a3" {
		t.Fatalf("after reopen: %+v", got)
	}
	if typing, _ := s2.LoadTyping(); len(typing) != 1 || typing[0].MsgID != "m-a1" {
		t.Fatalf("typing records %+v", typing)
	}
}

// TestPaneQueueNextLane: a brief put in the next lane heads the queue
// before every brief typing has not begun on, after any it has (its text
// may sit in the composer); next-lane briefs keep their own order; the
// bound counts both lanes; deleting takes a record from its own lane.
func TestPaneQueueNextLane(t *testing.T) {
	s, _ := open(t, 0)
	put := func(env string, next bool) (store.QueuedBrief, int) {
		q := store.QueuedBrief{Pane: "w1:p1", To: "w", Env: []byte(env), Next: next}
		ahead, err := s.PutQueued(&q, "behind", 4)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		return q, ahead
	}
	head := func() string {
		t.Helper()
		h, ok, err := s.QueueHead("w1:p1")
		if err != nil || !ok {
			t.Fatalf("head: %v %v", ok, err)
		}
		return string(h.Env)
	}
	a1, _ := put("a1", false)
	put("a2", false)
	if err := s.MarkTyped(a1, nil); err != nil {
		t.Fatal(err)
	}
	n1, ahead := put("n1", true)
	if ahead != 1 || n1.Told != "behind" { // behind the brief being typed only
		t.Fatalf("n1: %d ahead, told %q", ahead, n1.Told)
	}
	if _, ahead := put("n2", true); ahead != 2 {
		t.Fatalf("n2: %d ahead", ahead)
	}
	if _, err := s.PutQueued(&store.QueuedBrief{Pane: "w1:p1", Env: []byte("n3"), Next: true}, "behind", 4); !errors.Is(err, store.ErrQueueFull) {
		t.Fatalf("a fifth brief over both lanes bounded at 4: %v", err)
	}
	if h := head(); h != "a1" {
		t.Fatalf("a typed brief settles first, head is %s", h)
	}
	a1.Typed = true
	steps := []struct {
		del  store.QueuedBrief
		want string
	}{{a1, "n1"}, {n1, "n2"}}
	for _, st := range steps {
		if err := s.DeleteQueued(st.del); err != nil {
			t.Fatal(err)
		}
		if h := head(); h != st.want {
			t.Fatalf("after %s: head %s, want %s", st.del.Env, h, st.want)
		}
	}
	all, err := s.QueuedFor("w1:p1")
	if err != nil || len(all) != 2 || string(all[0].Env) != "n2" || !all[0].Next || string(all[1].Env) != "a2" {
		t.Fatalf("queue: %+v %v", all, err)
	}
	if panes, _ := s.QueuedPanes(); len(panes) != 1 || panes[0] != "w1:p1" {
		t.Fatalf("panes %q", panes)
	}
}

// TestPaneQueueEnterRetriesAndWalk: own-draft recovery's Enter count and
// time survive a reopen (a restart does not reset the retry bound), and
// WalkQueued visits every brief of every pane in both lanes.
func TestPaneQueueEnterRetriesAndWalk(t *testing.T) {
	s, path := open(t, 0)
	q := store.QueuedBrief{Pane: "w1:p1", To: "w", Env: []byte("a1")}
	if _, err := s.PutQueued(&q, "behind", 0); err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.QueuedBrief{{Pane: "w1:p1", To: "w", Env: []byte("a2")}, {Pane: "w1:p2", To: "v", Env: []byte("b1")}, {Pane: "w1:p2", To: "v", Env: []byte("n1"), Next: true}} {
		if _, err := s.PutQueued(&r, "behind", 0); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	q.Typed, q.Enters, q.EnterAt = true, 2, at
	if err := s.UpdateQueued(q); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h, ok, err := s.QueueHead("w1:p1")
	if err != nil || !ok || !h.Typed || h.Enters != 2 || !h.EnterAt.Equal(at) {
		t.Fatalf("head after reopen: %+v %v %v", h, ok, err)
	}
	var seen []string
	if err := s.WalkQueued(func(q store.QueuedBrief) { seen = append(seen, q.Pane+"/"+string(q.Env)) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	if want := []string{"w1:p1/a1", "w1:p1/a2", "w1:p2/b1", "w1:p2/n1"}; !slices.Equal(seen, want) {
		t.Fatalf("walked %v, want %v", seen, want)
	}
}
