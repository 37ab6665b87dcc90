package herdr

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// follower is the Watcher's consumer in these tests: it follows a set of
// panes and, like the bridge core, stops following a pane once told it
// closed.
type follower struct {
	mu     sync.Mutex
	panes  map[string]bool
	status map[string][]string
	closed map[string]int
}

func newFollower(panes ...string) *follower {
	f := &follower{panes: map[string]bool{}, status: map[string][]string{}, closed: map[string]int{}}
	for _, p := range panes {
		f.panes[p] = true
	}
	return f
}

func (f *follower) follow(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.panes[p] = true
}

func (f *follower) Panes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for p := range f.panes {
		out = append(out, p)
	}
	return out
}

func (f *follower) OnStatus(pane, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.status[pane]; len(s) == 0 || s[len(s)-1] != status {
		f.status[pane] = append(f.status[pane], status)
	}
}

func (f *follower) OnClosed(pane string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed[pane]++
	delete(f.panes, pane)
}

func (f *follower) lastStatus(p string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.status[p]
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func (f *follower) statuses(p string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.status[p]...)
}

func (f *follower) closedCount(p string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed[p]
}

func (f *follower) closedPanes() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.closed {
		out[k] = v
	}
	return out
}

// runWatcher runs w until the test ends.
func runWatcher(t *testing.T, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Error("Watcher.Run did not return after cancel")
		}
	})
}

func TestWatcherFollowsStatusAndClosing(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))

	// History before the watcher starts: the event ring holds these closes
	// and exits, which every new subscription replays.
	for range 3 {
		fake.ClosePane(fake.AddPane(herdrtest.PaneOptions{}))
		fake.ExitPane(fake.AddAgent(herdrtest.PaneOptions{}))
	}
	goneBefore := fake.AddAgent(herdrtest.PaneOptions{}) // followed, but closed before the watcher starts
	fake.ClosePane(goneBefore)

	a := fake.AddAgent(herdrtest.PaneOptions{Name: "a"})
	b := fake.AddAgent(herdrtest.PaneOptions{Name: "b"})
	exits := fake.AddAgent(herdrtest.PaneOptions{Name: "e"})
	alive := fake.AddPane(herdrtest.PaneOptions{})
	other := fake.AddAgent(herdrtest.PaneOptions{}) // not followed

	f := newFollower(a, b, exits, alive, goneBefore)
	runWatcher(t, &Watcher{Client: c, Panes: f.Panes, OnStatus: f.OnStatus, OnClosed: f.OnClosed, Resync: 150 * time.Millisecond})

	// The first snapshot: statuses of the living, the closed one reported.
	eventually(t, 3*time.Second, "snapshot statuses", func() bool {
		return f.lastStatus(a) == StatusDone && f.lastStatus(b) == StatusDone && f.lastStatus(alive) == StatusUnknown
	})
	eventually(t, 3*time.Second, "goneBefore reported", func() bool { return f.closedCount(goneBefore) == 1 })

	// Live status changes of followed panes.
	fake.SetStatus(a, StatusWorking)
	eventually(t, 3*time.Second, "a working", func() bool { return f.lastStatus(a) == StatusWorking })
	fake.SetBlocked(a, true)
	eventually(t, 3*time.Second, "a blocked", func() bool { return f.lastStatus(a) == StatusBlocked })
	fake.SetBlocked(a, false)
	fake.FinishTurn(a)
	eventually(t, 3*time.Second, "a done", func() bool { return f.lastStatus(a) == StatusDone })
	// A resync snapshot may report a status before older events arrive
	// (events converge to the same last state); the live ones come in order.
	time.Sleep(300 * time.Millisecond)
	if got := f.statuses(a); got[0] != StatusDone || got[len(got)-1] != StatusDone ||
		!slices.Contains(got, StatusBlocked) || slices.Index(got, StatusWorking) > slices.Index(got, StatusBlocked) {
		t.Fatalf("a went through %v", got)
	}
	fake.SetStatus(other, StatusWorking)

	// A followed pane that closes, and one whose process exits.
	fake.ClosePane(b)
	eventually(t, 3*time.Second, "b closed", func() bool { return f.closedCount(b) == 1 })
	fake.ExitPane(exits)
	eventually(t, 3*time.Second, "exits closed", func() bool { return f.closedCount(exits) == 1 })

	// More closes of panes nobody follows, then a few resyncs and
	// resubscriptions (each replays the whole ring again).
	fake.ClosePane(fake.AddPane(herdrtest.PaneOptions{}))
	fake.SetStatus(a, StatusWorking)
	eventually(t, 3*time.Second, "a working again", func() bool { return f.lastStatus(a) == StatusWorking })
	time.Sleep(700 * time.Millisecond)

	want := map[string]int{goneBefore: 1, b: 1, exits: 1}
	if got := f.closedPanes(); !mapsEqual(got, want) {
		t.Fatalf("OnClosed calls %v, want %v", got, want)
	}
	if f.statuses(other) != nil {
		t.Fatalf("status of an unfollowed pane reported: %v", f.statuses(other))
	}
	if s := f.statuses(alive); !slices.Equal(s, []string{StatusUnknown}) {
		t.Fatalf("alive pane statuses %v", s)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestWatcherNewPaneJoins: a pane followed later is picked up at the next
// resync, with its live status.
func TestWatcherNewPaneJoins(t *testing.T) {
	t.Parallel()
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))
	f := newFollower()
	runWatcher(t, &Watcher{Client: c, Panes: f.Panes, OnStatus: f.OnStatus, OnClosed: f.OnClosed, Resync: 100 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	p := fake.AddAgent(herdrtest.PaneOptions{})
	f.follow(p)
	eventually(t, 3*time.Second, "snapshot status", func() bool { return f.lastStatus(p) == StatusDone })
	// The new subscription must be in place before a live change counts.
	eventually(t, 3*time.Second, "resubscribed", func() bool {
		for _, s := range requests(t, fake, "events.subscribe") {
			if strings.Contains(mustJSON(t, s), p) {
				return true
			}
		}
		return false
	})
	fake.SetStatus(p, StatusWorking)
	eventually(t, 3*time.Second, "live status", func() bool { return f.lastStatus(p) == StatusWorking })
}

// TestWatcherWaitsForHerdr: while nothing listens on the socket the
// watcher keeps retrying (and says so once); when herdr appears at the
// path it starts following.
func TestWatcherWaitsForHerdr(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "hbw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "herdr.sock")
	var logs testlog.Buffer
	c := &Client{Path: path}
	f := newFollower()
	runWatcher(t, &Watcher{Client: c, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Panes: f.Panes, OnStatus: f.OnStatus, OnClosed: f.OnClosed, Resync: 100 * time.Millisecond})

	time.Sleep(800 * time.Millisecond) // at least two failed attempts (0 and 500 ms)
	if n := strings.Count(logs.String(), "level=WARN msg=\"herdr is not running"); n != 1 {
		t.Fatalf("not-running logged %d times: %q", n, logs.String())
	}
	fake := herdrtest.New(t, herdrtest.WithSocketPath(path), herdrtest.WithTurnDuration(0))
	t.Cleanup(func() { noViolations(t, fake) })
	p := fake.AddAgent(herdrtest.PaneOptions{})
	f.follow(p)
	eventually(t, 5*time.Second, "following once herdr is up", func() bool { return f.lastStatus(p) == StatusDone })
	eventually(t, 3*time.Second, "subscribed for the pane", func() bool {
		for _, s := range requests(t, fake, "events.subscribe") {
			if strings.Contains(mustJSON(t, s), p) {
				return true
			}
		}
		return false
	})
	fake.SetStatus(p, StatusWorking)
	eventually(t, 3*time.Second, "live status", func() bool { return f.lastStatus(p) == StatusWorking })
	fake.ClosePane(p)
	eventually(t, 3*time.Second, "closed", func() bool { return f.closedCount(p) == 1 })
}
