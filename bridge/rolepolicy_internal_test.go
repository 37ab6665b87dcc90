package bridge

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestBindingKeepsRoleAcrossRestart: the role a sender's signed presence
// named is kept with its binding in state.db, so a gateway that restarts
// judges a backlog from that sender (arriving before its next heartbeat)
// by its role. Without it the simulator's restart schedules saw a
// primary's briefs refused as from a sender of unknown role (seed 2,
// faults abandon,stall,restart).
func TestBindingKeepsRoleAcrossRestart(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	m := newMemory(16, 24*time.Hour, time.Minute)
	m.bind("p", "h1", RolePrimary, now)
	m.bind("w", "h1", RoleWorker, now)
	m.bind("w", "h1", "", now.Add(time.Second)) // a Gone names no role: the known one stays
	m.save(st, now, slog.New(slog.DiscardHandler))
	again := newMemory(16, 24*time.Hour, time.Minute)
	if err := again.load(st, now); err != nil {
		t.Fatal(err)
	}
	for gid, want := range map[string]Role{"p": RolePrimary, "w": RoleWorker} {
		if got := again.roleOf(gid, "h1"); got != want {
			t.Errorf("after a restart %s is %q, want %q", gid, got, want)
		}
		if got := again.roleOf(gid, "h2"); got != "" {
			t.Errorf("%s on another host is %q, want none", gid, got)
		}
	}
	// a role that changes is persisted at once, not an hour later
	again.bind("w", "h1", RolePrimary, now.Add(time.Minute))
	again.save(st, now.Add(time.Minute), slog.New(slog.DiscardHandler))
	third := newMemory(16, 24*time.Hour, time.Minute)
	if err := third.load(st, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := third.roleOf("w", "h1"); got != RolePrimary {
		t.Errorf("a changed role came back as %q", got)
	}
}
