package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryPurgeOffline: with no gateway running, `history purge`
// deletes the files itself: --name one entity's, without it every one.
func TestHistoryPurgeOffline(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history")
	if err := os.MkdirAll(hist, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"lead", "w1", "w2"} {
		if err := os.WriteFile(filepath.Join(hist, n+".jsonl"), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := cli("history", "purge", "--state-dir", dir, "--name", "lead@thishost")
	if err != nil || !strings.Contains(out, "purged 1 ") {
		t.Fatalf("purge --name: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(hist, "lead.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lead's history is still there: %v", err)
	}
	out, _, err = cli("history", "purge", "--state-dir", dir)
	if err != nil || !strings.Contains(out, "purged 2 ") {
		t.Fatalf("purge: %q %v", out, err)
	}
	if left, _ := os.ReadDir(hist); len(left) != 0 {
		t.Fatalf("left after purge: %v", left)
	}
}
