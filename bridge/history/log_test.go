package history_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/history"
)

// start runs a Log on dir until the test ends.
func start(t *testing.T, cfg history.Config) *history.Log {
	t.Helper()
	l := history.New(cfg, nil, time.Now, func(id string) string { return "name-of-" + id })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func entry(dir, id string) history.Entry {
	return history.Entry{TS: time.Now().UTC(), Dir: dir, Kind: "SEND", MsgID: id, From: "a", To: "b"}
}

// TestLogWritesReadsPurges: what Add queued is in the file once Flush
// returns, with its body and the names the writer looked up, in a 0600
// file; a torn last line is cut before the next append; Purge deletes.
func TestLogWritesReadsPurges(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lead.jsonl"), []byte(`{"ts":"2026-01-01T00:00:00Z","dir":"out","ms`), 0o644); err != nil {
		t.Fatal(err)
	}
	l := start(t, history.Config{Dir: dir})
	l.Add("lead", entry(history.Out, "m1"), []byte("one"))
	l.Add("lead", entry(history.In, "m2"), []byte("two"))
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	es, skipped, err := l.Read("lead")
	if err != nil || skipped != 0 || len(es) != 2 {
		t.Fatalf("read: %d entries, %d skipped, %v (the torn line was not cut?)", len(es), skipped, err)
	}
	if es[0].Body != "one" || es[0].FromName != "name-of-a" || es[1].ToName != "name-of-b" || es[1].Dir != history.In {
		t.Fatalf("entries: %+v", es)
	}
	if fi, err := os.Stat(filepath.Join(dir, "lead.jsonl")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v, mode %v", err, fi.Mode().Perm())
	}
	if es, _, err := l.Read("nobody"); err != nil || len(es) != 0 {
		t.Fatalf("no file: %v %v", es, err)
	}
	if n, err := l.Purge("lead"); n != 1 || err != nil {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, err := history.PurgeFiles(dir, "../x"); err == nil {
		t.Fatal("a name with a path separator was purged")
	}
}

// TestLogCompacts: past MaxBytes the file is rewritten with the newest
// entries within three quarters of it.
func TestLogCompacts(t *testing.T) {
	dir := t.TempDir()
	l := start(t, history.Config{Dir: dir, MaxBytes: 8 << 10})
	body := strings.Repeat("x", 300)
	for i := range 100 {
		l.Add("lead", entry(history.Out, fmt.Sprint("m", i)), []byte(body))
		if err := l.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	es, _, err := l.Read("lead")
	if err != nil || len(es) == 0 || len(es) >= 100 || es[len(es)-1].MsgID != "m99" {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "lead.jsonl")); fi.Size() > 8<<10 {
		t.Fatalf("file of %d bytes over MaxBytes", fi.Size())
	}
}
