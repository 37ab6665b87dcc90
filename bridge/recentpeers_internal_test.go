package bridge

import (
	"fmt"
	"slices"
	"testing"
)

// TestRosterRecentPeersBounded: an entity's recent peers are newest
// first, each once, at most recentPeerMax; past recentPeerOwners owners
// the one touched longest ago is dropped; forget drops a list.
func TestRosterRecentPeersBounded(t *testing.T) {
	var r recentPeers
	r.touch("a", "b")
	r.touch("a", "c")
	r.touch("a", "b")
	r.touch("a", "a") // itself: never a peer
	r.touch("", "b")
	if got := r.list("a"); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("a's peers %v, want [b c]", got)
	}
	for i := range recentPeerMax + 5 {
		r.touch("a", fmt.Sprint("p", i))
	}
	if got := r.list("a"); len(got) != recentPeerMax || got[0] != fmt.Sprint("p", recentPeerMax+4) {
		t.Fatalf("a's peers %v: want the newest %d, newest first", got, recentPeerMax)
	}
	for i := range recentPeerOwners {
		r.touch(fmt.Sprint("o", i), "x")
	}
	if r.list("a") != nil {
		t.Error("a, touched longest ago, was kept past recentPeerOwners owners")
	}
	if len(r.by) != recentPeerOwners {
		t.Errorf("%d lists: want %d", len(r.by), recentPeerOwners)
	}
	r.touch("o0", "y") // now the newest: o1 goes next
	r.touch("new", "y")
	if r.list("o0") == nil || r.list("o1") != nil {
		t.Error("past the bound, the owner touched longest ago must go, and only it")
	}
	r.forget("o7")
	if r.list("o7") != nil || len(r.by) != recentPeerOwners-1 {
		t.Error("forget kept o7's list")
	}
}
