package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/audit"
)

// The files of testdata/statefiles were written by the gateway as it was
// before history and audit moved to their own packages (commit 6a4c740):
// lead.jsonl, a history file (a brief, its reply, a body with characters
// JSON escapes), and audit.log, the audit lines of the same exchange.
// What a core reads from them, recorded then in the .golden.json files,
// must stay what it reads now: a state dir written by an older build
// reads the same.
const statefiles = "testdata/statefiles"

// TestStateFilesReadTheSame: a history file and an audit log written by
// the older build give the same bridge_history and trace as they did.
func TestStateFilesReadTheSame(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history")
	copyFixture(t, "lead.jsonl", filepath.Join(hist, "lead.jsonl"))
	copyFixture(t, "audit.log", filepath.Join(dir, "audit.log"))
	a, err := audit.Open(filepath.Join(dir, "audit.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	h := newHarness(t, func(c *bridge.Config) {
		c.Audit = a
		c.History = bridge.HistoryConfig{Dir: hist, MaxAge: 100 * 365 * 24 * time.Hour}
	})
	lead := h.regHistory("lead", bridge.RolePrimary)
	v := h.history(lead, bridge.HistoryRequest{Max: 500})
	matchGolden(t, "history.golden.json", v)
	rep, err := h.c.Trace(context.Background(), v.Entries[0].TraceID, 0)
	if err != nil {
		t.Fatal(err)
	}
	matchGolden(t, "trace.golden.json", rep.Hosts[0].Hops)
}

func copyFixture(t *testing.T, name, to string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(statefiles, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// matchGolden compares v, as indented JSON, with the golden file name.
func matchGolden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(statefiles, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Fatalf("%s differs:\n got %s\nwant %s", name, got, want)
	}
}
