package history

import (
	"bytes"
	"encoding/json"
	"time"
)

// The history file: one JSON object a line (Entry), appended by the
// writer, one file per entity. A crash can tear the last line; Parse
// skips a line it cannot read and counts it, and the writer cuts a torn
// tail before appending again.

// Entry is one message an entity sent (dir Out) or received (dir In), as
// its file keeps it. Its JSON is the file format: a field renamed here
// makes every history on disk unreadable.
type Entry struct {
	TS       time.Time `json:"ts"` // sent (out) or arrived (in)
	Dir      string    `json:"dir"`
	Kind     string    `json:"kind"`
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

// Directions of an entry.
const (
	Out = "out"
	In  = "in"
)

// Parse reads a history file's content: the entries of every line it can
// read, in file order, and how many lines it skipped (torn or damaged).
// It never fails.
func Parse(data []byte) (entries []Entry, skipped int) {
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
		e, ok := parseLine(line)
		if !ok {
			skipped++
			continue
		}
		entries = append(entries, e)
	}
	return entries, skipped
}

func parseLine(line []byte) (Entry, bool) {
	var e Entry
	if json.Unmarshal(line, &e) != nil || (e.Dir != Out && e.Dir != In) || e.MsgID == "" {
		return Entry{}, false
	}
	return e, true
}

// AppendLine appends e to b as one line of a history file.
func AppendLine(b []byte, e *Entry) []byte {
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
