package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/storedamage"
)

const heldN = 120

// heldTemplate is a stopped gateway's state dir in which "keeper" holds
// heldN messages, with keeper's token; copy it per case with heldCopy.
func heldTemplate(t *testing.T) (dir, token string) {
	t.Helper()
	dir = gatewaytest.TempDir(t)
	g, err := gateway.Open(context.Background(), gatewaytest.LocalConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- g.Run(context.Background()) }()
	defer func() { g.Close(); <-ran }()
	_, token = gatewaytest.Register(t, g, "keeper", "primary")
	w := gatewaytest.StdioConn(t, g, "sender", "worker")
	for i := 0; i < heldN; i++ {
		w.MustStatus("bridge_send", map[string]any{"target": "keeper", "message": fmt.Sprintf("held %03d %s", i, strings.Repeat("x", 200))}, "confirmed")
	}
	gatewaytest.WaitHeld(t, g, "keeper", heldN)
	w.Client.Close()
	return dir, token
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
