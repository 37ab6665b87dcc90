package bridge

import (
	"bytes"
	"encoding/json"
	"time"
)

// The history file: one JSON object a line (HistoryEntry), appended by the
// history writer, one file per entity (<name>.jsonl, mode 0600). A crash
// can tear the last line; the parser skips a line it cannot read and
// counts it, and the writer cuts a torn tail before appending again.

// HistoryEntry is one message an entity sent (dir "out") or received
// (dir "in"), as its history keeps it.
type HistoryEntry struct {
	TS       time.Time `json:"ts"` // sent (out) or arrived (in)
	Dir      string    `json:"dir"`
	Kind     Kind      `json:"kind"`
	MsgID    string    `json:"msgId"`
	From     string    `json:"from"`
	FromName string    `json:"fromName,omitempty"`
	To       string    `json:"to"`
	ToName   string    `json:"toName,omitempty"`
	Body     string    `json:"body"`
	TurnID   string    `json:"turnId,omitempty"`
	Corr     string    `json:"corr,omitempty"`
	TraceID  string    `json:"traceId,omitempty"`
}

// History directions.
const (
	HistoryOut = "out"
	HistoryIn  = "in"
)

// ParseHistory reads a history file's content: the entries of every line
// it can read, in file order, and how many lines it skipped (torn or
// damaged). It never fails.
func ParseHistory(data []byte) (entries []HistoryEntry, skipped int) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 { // the last line has no newline: torn by a crash
			return entries, skipped + 1
		}
		line := data[:i]
		data = data[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, ok := parseHistoryLine(line)
		if !ok {
			skipped++
			continue
		}
		entries = append(entries, e)
	}
	return entries, skipped
}

func parseHistoryLine(line []byte) (HistoryEntry, bool) {
	var e HistoryEntry
	if json.Unmarshal(line, &e) != nil || (e.Dir != HistoryOut && e.Dir != HistoryIn) || e.MsgID == "" {
		return HistoryEntry{}, false
	}
	return e, true
}

// AppendHistoryLine appends e to b as one line of a history file.
func AppendHistoryLine(b []byte, e *HistoryEntry) []byte {
	raw, err := json.Marshal(e)
	if err != nil { // nothing in an entry fails to encode
		return b
	}
	return append(append(b, raw...), '\n')
}

// tornTail is the length of data's last line when it has no newline (a
// write a crash cut short), else 0.
func tornTail(data []byte) int {
	if len(data) == 0 || data[len(data)-1] == '\n' {
		return 0
	}
	return len(data) - (bytes.LastIndexByte(data, '\n') + 1)
}
