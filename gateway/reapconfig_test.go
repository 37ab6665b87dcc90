package gateway_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
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
