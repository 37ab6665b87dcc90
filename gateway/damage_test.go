package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/storedamage"
)

const heldN = 120

// heldConfig caps what the core moves into state.db at half of heldN, so
// the other half stays in transport.db's inbox: the held messages live in
// both stores, and damage to either loses only its own.
func heldConfig(t *testing.T, dir string) gateway.Config {
	cfg := gatewaytest.LocalConfig(t, dir)
	cfg.Core.InboxMaxLength = heldN / 2
	return cfg
}

// heldTemplate is a stopped gateway's state dir in which "keeper" holds
// heldN messages, with keeper's token; copy it per case with heldCopy.
func heldTemplate(t *testing.T) (dir, token string) {
	dir, token, _ = heldTemplateGID(t)
	return dir, token
}

func heldTemplateGID(t *testing.T) (dir, token, gid string) {
	t.Helper()
	dir = gatewaytest.TempDir(t)
	g, err := gateway.Open(context.Background(), heldConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- g.Run(context.Background()) }()
	defer func() { g.Close(); <-ran }()
	gid, token = gatewaytest.Register(t, g, "keeper", "primary")
	w := gatewaytest.StdioConn(t, g, "sender", "worker")
	for i := 0; i < heldN; i++ {
		w.MustStatus("bridge_send", map[string]any{"target": "keeper", "message": fmt.Sprintf("held %03d %s", i, strings.Repeat("x", 200))}, "confirmed")
	}
	gatewaytest.WaitHeld(t, g, "keeper", heldN)
	// a held message is written to state.db after SpillDelay (or at once
	// in a backlog): wait until the store has its share, up to the cap
	st := g.Core().Config().Store
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		_ = st.EachHeld(func(string, uint64, []byte) error { n++; return nil })
		if n == heldN/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state.db holds %d of keeper's messages, want %d", n, heldN/2)
		}
	}
	w.Client.Close()
	return dir, token, gid
}

// heldCopy copies the template's stores into a new dir.
func heldCopy(t *testing.T, src string) string {
	t.Helper()
	dir := gatewaytest.TempDir(t)
	for _, name := range []string{"state.db", "transport.db"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDamagedStoreRefusesToStart: each damage of each store stops the
// gateway with an error naming the file and `herdbridge repair`, never a
// panic or a fault, and leaves the file as it was.
func TestDamagedStoreRefusesToStart(t *testing.T) {
	src, _ := heldTemplate(t)
	for _, name := range []string{"state.db", "transport.db"} {
		for _, kind := range storedamage.Kinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dir := heldCopy(t, src)
				path := filepath.Join(dir, name)
				if err := storedamage.Apply(path, kind); err != nil {
					t.Fatal(err)
				}
				before, _ := os.ReadFile(path)
				g, err := gateway.Open(context.Background(), gatewaytest.LocalConfig(t, dir))
				if err == nil {
					g.Close()
					t.Fatal("started on a damaged store")
				}
				msg := err.Error()
				if !strings.Contains(msg, path) || !strings.Contains(msg, "herdbridge repair --state-dir "+dir) || !strings.Contains(msg, "nothing was deleted") {
					t.Fatalf("error %q should name %s and the repair command", msg, path)
				}
				if after, _ := os.ReadFile(path); string(after) != string(before) {
					t.Fatal("the damaged file was modified")
				}
				t.Log(msg)
			})
		}
	}
}

// TestMissingStateBesideInboxesRefused: a state.db gone from beside a
// transport.db that still holds inboxes is refused, not a silent start
// with no entities.
func TestMissingStateBesideInboxesRefused(t *testing.T) {
	src, _ := heldTemplate(t)
	dir := heldCopy(t, src)
	if err := os.Remove(filepath.Join(dir, "state.db")); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Open(context.Background(), gatewaytest.LocalConfig(t, dir))
	if err == nil {
		g.Close()
		t.Fatal("started with no registry beside a transport.db holding inboxes")
	}
	if !strings.Contains(err.Error(), "state.db is missing") || !strings.Contains(err.Error(), "herdbridge repair") {
		t.Fatalf("error %q", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("state.db was created")
	}
}

// TestRepairThenDrain is the damage matrix end to end: each damage of each
// store is refused, `repair` lets the gateway start, and every held
// message still readable in the repaired files is drained by its entity,
// once.
func TestRepairThenDrain(t *testing.T) {
	src, token, gid := heldTemplateGID(t)
	for _, name := range []string{"state.db", "transport.db"} {
		for _, kind := range storedamage.Kinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				dir := heldCopy(t, src)
				// a page of messages: the bodies' padding, base64 as both stores keep it
				if err := storedamage.ApplyTo(filepath.Join(dir, name), kind, []byte("eHh4eHh4eHh4")); err != nil {
					t.Fatal(err)
				}
				if g, err := gateway.Open(context.Background(), heldConfig(t, dir)); err == nil {
					g.Close()
					t.Fatal("started on a damaged store")
				}
				report, err := gateway.Repair(dir, time.Now())
				if err != nil {
					t.Fatalf("repair: %v\n%s", err, report)
				}
				t.Log(report)
				if !strings.Contains(report, name+": damaged") || !strings.Contains(report, "kept aside as") {
					t.Fatalf("report does not say what it did to %s:\n%s", name, report)
				}
				inState, inInbox, registered := readableHeld(t, dir, gid)
				readable := inState + inInbox
				g := gatewaytest.Start(t, heldConfig(t, dir))
				if !registered {
					if readable != 0 {
						t.Fatalf("%d held messages for an entity that is gone", readable)
					}
					return // the registry was lost: nothing can be drained, as the report says
				}
				// the undamaged store keeps all of its share
				if name == "transport.db" && inState != heldN/2 || name == "state.db" && inInbox != heldN-heldN/2 {
					t.Fatalf("damage to %s lost messages of the other store: %d in state.db, %d in transport.db", name, inState, inInbox)
				}
				gatewaytest.WaitHeld(t, g, "keeper", readable) // transport.db's share is redelivered after the start
				k := gatewaytest.TokenConn(t, g.URL(), "keeper", token)
				got := map[string]int{}
				for {
					r := k.Call("bridge_poll", map[string]any{"max": 500})
					if len(r.Messages) == 0 {
						break
					}
					for _, m := range r.Messages {
						if !strings.HasPrefix(m.Body, "held ") {
							t.Fatalf("drained %q", m.Body)
						}
						got[m.Body]++
					}
				}
				for body, n := range got {
					if n > 1 {
						t.Fatalf("%q drained %d times", body[:8], n)
					}
				}
				if len(got) != readable {
					t.Fatalf("drained %d messages, %d were readable after repair", len(got), readable)
				}
				t.Logf("%s %s: %d of %d held messages drained after repair (%d readable in state.db, %d in transport.db)", name, kind, len(got), heldN, inState, inInbox)
			})
		}
	}
}

// readableHeld counts the messages held for gid in the repaired stores of
// dir (state.db's held records, transport.db's inbox), and whether gid is
// still registered (if not, nothing counts).
func readableHeld(t *testing.T, dir, gid string) (inState, inInbox int, registered bool) {
	t.Helper()
	gids, err := store.EntityGIDs(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gids {
		registered = registered || g == gid
	}
	s, err := store.Open(filepath.Join(dir, "state.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	err = s.EachHeld(func(g string, _ uint64, _ []byte) error {
		if g == gid {
			inState++
		}
		return nil
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	inboxes, err := embedded.Inboxes(filepath.Join(dir, "transport.db"))
	if err != nil {
		t.Fatal(err)
	}
	if !registered {
		return 0, 0, false
	}
	return inState, inboxes[gid], true
}
