package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestRolePolicyFromConfigFile: "rolePolicy": {"workersMayBrief": true}
// in config.json reaches the core: a worker may then brief another
// worker, which without it is refused with a tool error saying why.
func TestRolePolicyFromConfigFile(t *testing.T) {
	for _, c := range []struct {
		json     string
		mayBrief bool
	}{{`{}`, false}, {`{"rolePolicy": {"workersMayBrief": true}}`, true}} {
		dir := gatewaytest.TempDir(t)
		path := filepath.Join(dir, "config.json")
		if err := os.WriteFile(path, []byte(c.json), 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := gateway.LoadFile(path, true)
		if err != nil {
			t.Fatal(err)
		}
		cfg := gatewaytest.LocalConfig(t, dir)
		herdr := cfg.File.Herdr
		cfg.File = file
		cfg.File.Herdr = herdr
		g := gatewaytest.Start(t, cfg)
		w1 := gatewaytest.RegisterOn(t, g, "w1", bridge.RoleWorker)
		gatewaytest.RegisterOn(t, g, "w2", bridge.RoleWorker)
		_, err = g.Core().Send(context.Background(), w1.GID, bridge.SendRequest{Target: "w2", Message: "hi"}, nil)
		switch {
		case c.mayBrief && err != nil:
			t.Fatalf("%s: a worker's brief to a worker refused: %v", c.json, err)
		case !c.mayBrief && (err == nil || !strings.Contains(err.Error(), "workersMayBrief")):
			t.Fatalf("%s: a worker's brief to a worker: %v, want refused naming rolePolicy.workersMayBrief", c.json, err)
		}
		g.Close()
	}
}
