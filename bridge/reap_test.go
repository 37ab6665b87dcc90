package bridge_test

// Reaping (reap.go): an entity outside a pane idle StaleAfter shows stale,
// idle ReapAfter is removed with its inbox, what it held dead-lettered and
// each brief's or reply's sender told FAILED; nothing else is touched.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func reapHarness(t *testing.T) *harness {
	return newHarness(t, func(c *bridge.Config) {
		c.MessageTTL = 60 * 24 * time.Hour // nothing expires in these tests: only reaping acts
		c.StaleAfter, c.ReapAfter = 24*time.Hour, 7*24*time.Hour
	})
}

func (h *harness) status(name string) string {
	v, ok := h.view(name)
	if !ok {
		return "(gone)"
	}
	return v.Status
}

func TestReapIdleEntity(t *testing.T) {
	h := reapHarness(t)
	ctx := context.Background()
	idle := h.reg("idle", bridge.RolePrimary)
	sender := h.reg("sender", bridge.RolePrimary)
	live := h.reg("live", bridge.RolePrimary)
	paned, _, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "paned", Role: bridge.RoleWorker, PaneID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	h.c.Attach(sender.GID)
	h.c.Attach(live.GID)
	defer h.c.Detach(sender.GID)
	defer h.c.Detach(live.GID)

	r1 := h.send(sender, bridge.SendRequest{Target: "idle", Message: "first"})
	r2 := h.send(sender, bridge.SendRequest{Target: "idle", Message: "second"})
	bc, err := h.c.Broadcast(ctx, sender.GID, bridge.BroadcastRequest{Message: "to all"})
	if err != nil {
		t.Fatal(err)
	}
	h.heldFor("idle", 3)
	h.heldFor("live", 1)
	if s := h.status("idle"); s != "detached" {
		t.Fatalf("idle at once: %s", s)
	}

	h.clk.Advance(25 * time.Hour)
	eventually(t, "idle shows stale", func() bool { return h.status("idle") == bridge.StatusStale })
	for name, want := range map[string]string{"live": "online", "sender": "online", "paned": "detached"} {
		if s := h.status(name); s != want {
			t.Fatalf("%s after 25 h: %s, want %s", name, s, want)
		}
	}
	if v, _ := h.view("idle"); v.LastSeen == nil || h.clk.Now().Sub(*v.LastSeen) < 24*time.Hour {
		t.Fatalf("stale idle's lastSeen: %v", v.LastSeen)
	}

	h.clk.Advance(7 * 24 * time.Hour)
	eventually(t, "idle reaped", func() bool { _, ok := h.c.Entity(idle.GID); return !ok })
	for _, name := range []string{"live", "sender", "paned"} {
		if _, ok := h.view(name); !ok {
			t.Fatalf("%s was removed too", name)
		}
	}
	if _, ok := h.c.Entity(paned.GID); !ok {
		t.Fatal("the entity in a pane was reaped")
	}

	// the sender hears FAILED for each message, with the reason
	got := h.poll(sender, bridge.PollRequest{Wait: 2 * time.Second, Max: 10})
	var corrs []string
	for _, m := range got.Messages {
		if m.Kind != bridge.KindFailed || !strings.Contains(m.Body, "idle@h1 was removed after 8 days without a session") {
			t.Fatalf("sender got %s %q", m.Kind, m.Body)
		}
		corrs = append(corrs, m.Corr)
	}
	if len(corrs) < 2 {
		got2 := h.poll(sender, bridge.PollRequest{Wait: 2 * time.Second, Max: 10})
		for _, m := range got2.Messages {
			corrs = append(corrs, m.Corr)
		}
	}
	slices.Sort(corrs)
	want := []string{r1.MsgID, r2.MsgID}
	slices.Sort(want)
	if !slices.Equal(corrs, want) {
		t.Fatalf("FAILED about %v, want %v", corrs, want)
	}

	// all three are in the dead-letter log; only the two were reported
	dead, err := h.c.DeadLetters(100)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]bridge.DeadLetterRecord{}
	for _, d := range dead {
		if strings.HasPrefix(d.Reason, "reaped: ") {
			byID[d.MsgID] = d
		}
	}
	if len(byID) != 3 || !byID[r1.MsgID].Reported || !byID[r2.MsgID].Reported || byID[bc.MsgID].Reported || byID[bc.MsgID].Kind != string(bridge.KindBroadcast) {
		t.Fatalf("dead letters: %+v", byID)
	}

	// its inbox and what the state file held for it are gone
	eventually(t, "its inbox deleted", func() bool {
		err := h.tr.Publish(ctx, idle.GID, h.rawEnv(bridge.KindReply, sender.GID, idle.GID, "late"), true)
		return errors.Is(err, bridge.ErrUnroutable)
	})
	eventually(t, "nothing held for it in the state file", func() bool {
		n := 0
		_ = h.st.EachHeld(func(gid string, _ uint64, _ []byte) error {
			if gid == idle.GID {
				n++
			}
			return nil
		})
		return n == 0
	})

	// the name is free again: a new entity
	again := h.reg("idle", bridge.RolePrimary)
	if again.GID == idle.GID {
		t.Fatal("re-registered the reaped gid")
	}
	if s := h.status("idle"); s != "detached" {
		t.Fatalf("the new idle: %s", s)
	}
}

// Activity keeps an entity: a token request or a tool call counts, as a
// session does.
func TestActivityKeepsEntity(t *testing.T) {
	h := reapHarness(t)
	ctx := context.Background()
	e, tok, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "http", Role: bridge.RolePrimary})
	if err != nil {
		t.Fatal(err)
	}
	caller := h.reg("caller", bridge.RolePrimary)
	for range 3 {
		h.clk.Advance(5 * 24 * time.Hour)
		if _, ok := h.c.Authenticate(tok); !ok {
			t.Fatal("token refused")
		}
		if _, err := h.c.Poll(ctx, caller.GID, bridge.PollRequest{}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // sweeps run; none may reap
		for _, name := range []string{"http", "caller"} {
			if s := h.status(name); s != "detached" {
				t.Fatalf("%s after 5 days with activity: %s", name, s)
			}
		}
	}
	if _, ok := h.c.Entity(e.GID); !ok {
		t.Fatal("reaped despite activity")
	}
}

// The last activity survives a restart, and a gateway down long does not
// reap its entities at once: they show stale and get the rest of the
// reaping time to come back.
func TestReapAcrossRestart(t *testing.T) {
	h := reapHarness(t)
	a := h.reg("a", bridge.RolePrimary)
	start := h.clk.Now()
	h.c.Attach(a.GID)
	h.clk.Advance(2 * time.Hour)
	eventually(t, "a sweep saves the open session's activity", func() bool {
		recs, err := h.st.LoadEntities()
		for _, r := range recs {
			if r.GID == a.GID && err == nil {
				return r.LastSeen.Sub(start) >= time.Hour
			}
		}
		return false
	})
	h.c.Detach(a.GID)
	h.restart()
	v, _ := h.view("a")
	if v.LastSeen == nil || v.LastSeen.Sub(start) < time.Hour {
		t.Fatalf("lastSeen after restart: %v, want about %v", v.LastSeen, start.Add(2*time.Hour))
	}

	// down 30 days
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(30 * 24 * time.Hour)
	h.start()
	eventually(t, "a stale after the long stop", func() bool { return h.status("a") == bridge.StatusStale })
	time.Sleep(150 * time.Millisecond)
	if _, ok := h.c.Entity(a.GID); !ok {
		t.Fatal("reaped at once after a long stop")
	}
	h.clk.Advance(6*24*time.Hour + time.Minute)
	eventually(t, "a reaped after the rest of the time", func() bool { _, ok := h.c.Entity(a.GID); return !ok })
}
