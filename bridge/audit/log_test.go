package audit_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/herdbridge/herdbridge/bridge/audit"
)

// TestLog: records land as JSON lines in a 0600 file; a disk that
// fails (/dev/full) is reported (Err) and counted (Dropped), never blocks.
func TestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := audit.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		a.Write(audit.Record{Dir: "in", Kind: "REPLY", MsgID: "m", Verdict: "accepted"})
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Write(audit.Record{Verdict: "after close"}) // dropped, no panic
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 100 {
		t.Fatalf("%d lines, want 100", n)
	}
	var r audit.Record
	if err := json.Unmarshal(b[:bytes.IndexByte(b, '\n')], &r); err != nil || r.Verdict != "accepted" {
		t.Fatalf("line: %v %+v", err, r)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	full, err := audit.Open("/dev/full", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		full.Write(audit.Record{Verdict: "accepted"})
	}
	if err := full.Close(); err == nil || full.Dropped() == 0 {
		t.Fatalf("a full disk: err %v, dropped %d", err, full.Dropped())
	}
	t.Logf("full disk: %v, %d dropped", full.Err(), full.Dropped())
}
