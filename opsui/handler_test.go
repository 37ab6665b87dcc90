package opsui

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// rosterOnly is a Source with a fixed roster and nothing dead or refused:
// what these handler tests need of a core.
type rosterOnly struct{ v bridge.RosterView }

func (r rosterOnly) Roster() bridge.RosterView                        { return r.v }
func (rosterOnly) DeadLetters(int) ([]bridge.DeadLetterRecord, error) { return nil, nil }
func (rosterOnly) Refused() map[string]uint64                         { return nil }

func testHandler(feed *Feed) *Handler {
	v := bridge.RosterView{Hosts: []bridge.HostView{{Host: "h", Local: true}},
		Entities: []bridge.EntityView{{Entity: bridge.Entity{GID: "gid-a", Name: "alice", Host: "h"}}}}
	return NewHandler(Config{Source: rosterOnly{v}, Feed: feed, Logins: NewLogins(nil), Host: "h", Boot: "b00t",
		Operator: func(*http.Request) bool { return true }})
}

// TestPageServesLoopbackOnly: a peer that is not this host is refused,
// even with a session (with TLS the listener may face the network).
func TestPageServesLoopbackOnly(t *testing.T) {
	h := testHandler(NewFeed(8, 4))
	for remote, want := range map[string]int{"192.0.2.7:5000": 403, "[2001:db8::1]:5000": 403, "127.0.0.1:5000": 200, "[::1]:5000": 200} {
		req := httptest.NewRequest(http.MethodGet, "/ui/api/snapshot", nil)
		req.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("peer %s: %d, want %d", remote, w.Code, want)
		}
	}
}

// TestFeedTellsWhatASlowPageMissed: a page that comes back (Last-Event-ID)
// after more traffic than the ring keeps gets a "dropped" event with the
// count, then the ring's items, with names instead of gids.
func TestFeedTellsWhatASlowPageMissed(t *testing.T) {
	feed := NewFeed(8, 4)
	h := testHandler(feed)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Stop()
	for i := 1; i <= 100; i++ {
		feed.Observe(bridge.Event{Hop: bridge.HopAccept, MsgID: "m", From: "gid-a", To: "broadcast.ops"})
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/api/events", nil)
	req.Header.Set("Last-Event-ID", "b00t-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var got []string
	for len(got) < 4 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: ") || strings.HasPrefix(line, "data: ") || strings.HasPrefix(line, "id: ") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	// hello's event and data, then dropped's
	if got[2] != "event: dropped" || got[3] != `data: {"missed":91}` {
		t.Fatalf("after hello: %q", got)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {\"seq\":93") {
			if !strings.Contains(line, `"fromName":"alice"`) || !strings.Contains(line, `"toName":"group ops"`) {
				t.Fatalf("hop without names: %s", line)
			}
			return
		}
	}
}
