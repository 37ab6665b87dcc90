package audit_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/herdbridge/herdbridge/bridge/audit"
)

// TestFileFormatUnchanged: an audit log written by the gateway before
// this package existed (bridge/testdata/statefiles) scans whole, and
// each record encodes back to its line's bytes: what Log writes is the
// format on disk.
func TestFileFormatUnchanged(t *testing.T) {
	path := "../testdata/statefiles/audit.log"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	var first audit.Record
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	recs, scope, truncated, err := audit.Scan(path, first.TraceID, traceWindow, maxHops)
	if err != nil || truncated || !scope.Whole || len(recs) != len(lines) {
		t.Fatalf("%d records of %d lines, scope %+v, truncated %v, %v", len(recs), len(lines), scope, truncated, err)
	}
	for i := range recs {
		b, _ := json.Marshal(recs[i])
		if !bytes.Equal(b, lines[i]) {
			t.Fatalf("record %d re-encoded:\n%s\nwritten:\n%s", i, b, lines[i])
		}
	}
	// and Log writes a record as the same line
	out := filepath.Join(t.TempDir(), "audit.log")
	a, err := audit.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		a.Write(recs[i])
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(again, raw) {
		t.Fatalf("Log wrote:\n%s\nthe old gateway wrote:\n%s", again, raw)
	}
}

// FuzzScan: the audit log's reader takes any content — torn, overlong,
// not JSON, cut by any window — without an error or a panic, returns at
// most maxHops records, each with a msgId, and never reads more than the
// file holds.
func FuzzScan(f *testing.F) {
	id := "0211d440-1d5a-4bc5-8c00-ef6ba7cb718a"
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","dir":"out","hop":"publish","msgId":"`+id+`","verdict":"published"}`+"\n"), id, int64(1<<20))
	f.Add([]byte(`{"msgId":"`+id+`","traceId":"x"}`+"\nnot json "+id+"\n{\"msgId\":\""+id), "x", int64(30))
	f.Add([]byte("\n\n{}\n"), "", int64(0))
	f.Fuzz(func(t *testing.T, data []byte, id string, window int64) {
		path := filepath.Join(t.TempDir(), "audit.log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		recs, scope, _, err := audit.Scan(path, id, window, 3)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if len(recs) > 3 || scope.Bytes > int64(len(data)) || scope.Bytes < 0 {
			t.Fatalf("%d records, %d bytes read of %d", len(recs), scope.Bytes, len(data))
		}
		for _, r := range recs {
			if r.MsgID == "" {
				t.Fatalf("a record without a msgId: %+v", r)
			}
		}
	})
}
