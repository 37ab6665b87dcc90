package history_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge/history"
)

// TestFileFormatUnchanged: a history file written by the gateway before
// this package existed (bridge/testdata/statefiles) parses whole, and its
// entries encode back to the same bytes: the writer's lines are the
// format on disk.
func TestFileFormatUnchanged(t *testing.T) {
	raw, err := os.ReadFile("../testdata/statefiles/lead.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	es, skipped := history.Parse(raw)
	if len(es) != 2 || skipped != 0 || es[0].Dir != history.Out || es[1].Dir != history.In || es[0].Kind != "SEND" || es[1].FromName != "w" {
		t.Fatalf("%d entries, %d skipped: %+v", len(es), skipped, es)
	}
	var again []byte
	for i := range es {
		again = history.AppendLine(again, &es[i])
	}
	if !bytes.Equal(again, raw) {
		t.Fatalf("re-encoded:\n%s\nwritten:\n%s", again, raw)
	}
}

// FuzzParse: the history file's parser never fails or panics on any
// content, skips what it cannot read, and what it returns re-parses the
// same.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-01-01T00:00:00Z","dir":"out","kind":"SEND","msgId":"m1","from":"a","to":"b","body":"hi"}` + "\n"))
	f.Add([]byte(`{"ts":"2026-01-01T00:00:00Z","dir":"in","kind":"REPLY","msgId":"m2","body":"x\ny"}` + "\n{\"dir\":\"in\",\"ms"))
	f.Add([]byte("\n\n{}\nnot json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, skipped := history.Parse(data)
		if skipped < 0 || len(es)+skipped > strings.Count(string(data), "\n")+1 {
			t.Fatalf("%d entries and %d skipped from %d lines", len(es), skipped, strings.Count(string(data), "\n")+1)
		}
		var again []byte
		for i := range es {
			if es[i].Dir != history.In && es[i].Dir != history.Out {
				t.Fatalf("entry with dir %q", es[i].Dir)
			}
			again = history.AppendLine(again, &es[i])
		}
		es2, skipped2 := history.Parse(again)
		if len(es2) != len(es) || skipped2 != 0 {
			t.Fatalf("re-encoded %d entries parse as %d (%d skipped)", len(es), len(es2), skipped2)
		}
	})
}
