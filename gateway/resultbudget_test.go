package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resultMaxBytes in the config file reaches the core; a negative one is
// refused at start, saying what to do.
func TestResultMaxBytesFromTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"resultMaxBytes": 65536}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: Config{File: f}}
	if got := g.coreConfig().ResultMaxBytes; got != 65536 {
		t.Fatalf("core's ResultMaxBytes = %d, want the file's 65536", got)
	}
	if err := os.WriteFile(path, []byte(`{"resultMaxBytes": -1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path, true); err == nil || !strings.Contains(err.Error(), "resultMaxBytes") {
		t.Fatalf("a negative resultMaxBytes loaded: %v", err)
	}
}
