package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// staleAfter and reapAfter in config.json reach the core.
func TestReapConfigFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"staleAfter": "2h", "reapAfter": "48h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := gateway.LoadFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(fc.StaleAfter) != 2*time.Hour || time.Duration(fc.ReapAfter) != 48*time.Hour {
		t.Fatalf("parsed %+v", fc)
	}
}

// Over the admin socket: a name shaped like a gid is refused, so `remove
// --name <gid>` names one entity only; a 20 KB pane id is refused briefly.
func TestSocketRefusesGIDNames(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	a, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: "a", Role: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: a.Entity.GID, Role: "primary"})
	if err == nil || !strings.Contains(err.Error(), "looks like a gid") {
		t.Fatalf("register a gid as a name: %v", err)
	}
	_, err = gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: "b", Role: "worker", PaneID: "\x1b" + strings.Repeat("p", 20_000)})
	if err == nil || !strings.Contains(err.Error(), "pane id") || len(err.Error()) > 400 {
		t.Fatalf("register a 20 KB pane id: %.300v", err)
	}
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "remove", Name: a.Entity.GID})
	if err != nil || r.Entity == nil || r.Entity.Name != "a" {
		t.Fatalf("remove by gid: %+v, %v", r, err)
	}
	if len(g.Core().Roster().Entities) != 0 {
		t.Fatalf("left: %+v", g.Core().Roster().Entities)
	}
}
