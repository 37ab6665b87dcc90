package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestCorruptStateRefusesToStart: a corrupt store is a clear error naming
// the file, and the file is left as it was.
func TestCorruptStateRefusesToStart(t *testing.T) {
	for _, name := range []string{"state.db", "transport.db"} {
		t.Run(name, func(t *testing.T) {
			dir := gatewaytest.TempDir(t)
			junk := []byte("this is not a bbolt file, it is a test of what the gateway does with one")
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			g, err := gateway.Open(context.Background(), gateway.Config{StateDir: dir, Listen: "127.0.0.1:0", Host: "h"})
			if err == nil {
				g.Close()
				t.Fatal("started on a corrupt store")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "nothing was deleted") {
				t.Fatalf("error %q should name %s and say nothing was deleted", err, path)
			}
			if got, _ := os.ReadFile(path); string(got) != string(junk) {
				t.Fatal("the corrupt file was modified")
			}
		})
	}
}
