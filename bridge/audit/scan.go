package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Reading the log back. It only grows, so a reader takes a bounded window
// from its end: the newest window bytes of the log and, if the window is
// not used up, of <log>.1 (where logrotate moves it). Scan makes two
// passes over the window: the first finds the msgIds of the conversation
// (records carrying the id as traceId, msgId or corr), the second every
// record of those msgIds — a hop that carries no traceId (a held
// message's expiry) is found by its msgId.

// maxLineBytes bounds one line a reader takes; longer lines are not
// records this package wrote, and are skipped.
const maxLineBytes = 64 << 10

// Scope says how far back a Scan reached.
type Scope struct {
	Files []string  // the log files read (base names), oldest first
	Bytes int64     // how many bytes of them were read
	Since time.Time // the oldest record read: records before it are not seen
	Whole bool      // the whole log was read: nothing older exists
}

// logWindow is the part of one log file a trace reads: [from, to).
type logWindow struct {
	path     string
	from, to int64
}

// windows lays the window over path and its rotated predecessor,
// newest bytes first, and returns them oldest first (the order to read).
func windows(path string, budget int64) ([]logWindow, Scope, error) {
	var ws []logWindow
	scope := Scope{Whole: true}
	budget = max(budget, 0) // a negative window reads nothing
	for i, p := range []string{path, path + ".1"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && i > 0 {
			break
		}
		if err != nil {
			return nil, scope, fmt.Errorf("audit log: %w", err)
		}
		from := max(0, fi.Size()-budget)
		budget -= fi.Size() - from
		scope.Bytes += fi.Size() - from
		ws = append(ws, logWindow{path: p, from: from, to: fi.Size()})
		if from > 0 || budget <= 0 {
			scope.Whole = from == 0 && i > 0
			break
		}
	}
	slices.Reverse(ws)
	for _, w := range ws {
		scope.Files = append(scope.Files, filepath.Base(w.path))
	}
	return ws, scope, nil
}

// eachLine calls fn with every whole line of w (a line cut by the window's
// start is skipped; fn must not keep the slice).
func eachLine(w logWindow, fn func([]byte)) error {
	f, err := os.Open(w.path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	start := max(0, w.from-1) // from the byte before: a line starting at from is whole
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	br := bufio.NewReaderSize(io.LimitReader(f, w.to-start), maxLineBytes)
	skip := w.from > 0 // the line cut by the window (or just the newline before it)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			skip = true // an overlong line: drop the rest of it too
			continue
		case skip:
			skip = false
		case len(line) > 0:
			fn(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
	}
}

// Scan reads the records of id — a traceId or a msgId, in the form the
// log holds it — from the audit log at path, at most window bytes back:
// the records carrying id as traceId, msgId or corr, and every record of
// their msgIds. Records are in the log's order; truncated means more than
// maxHops matched and the earliest were kept. A line it cannot read is
// skipped, never an error.
func Scan(path, id string, window int64, maxHops int) (hops []Record, scope Scope, truncated bool, err error) {
	ws, scope, err := windows(path, window)
	if err != nil {
		return nil, scope, false, err
	}
	ids := map[string]bool{id: true}
	needle := []byte(id)
	first := true
	for _, w := range ws {
		err := eachLine(w, func(line []byte) {
			if first {
				first = false
				var r Record
				if json.Unmarshal(line, &r) == nil {
					scope.Since = r.At
				}
			}
			if !bytes.Contains(line, needle) {
				return
			}
			var r Record
			if json.Unmarshal(line, &r) != nil || r.MsgID == "" || r.TraceID != id && r.MsgID != id && r.Corr != id || ids[r.MsgID] {
				return
			}
			if len(ids) > maxHops { // each message has a hop: more would not be listed
				truncated = true
				return
			}
			ids[r.MsgID] = true
		})
		if err != nil {
			return nil, scope, false, err
		}
	}
	for _, w := range ws {
		err := eachLine(w, func(line []byte) {
			if !ids[string(lineMsgID(line))] {
				return
			}
			var r Record
			if json.Unmarshal(line, &r) != nil || r.MsgID == "" || !ids[r.MsgID] { // an empty id matches no record
				return
			}
			if len(hops) == maxHops {
				truncated = true
				return
			}
			hops = append(hops, r)
		})
		if err != nil {
			return nil, scope, false, err
		}
	}
	return hops, scope, truncated, nil
}

// msgIDKey is how a Record's msgId starts on its line.
var msgIDKey = []byte(`"msgId":"`)

// lineMsgID picks the msgId out of an audit line without decoding it
// (the second pass looks at every line of the window): nil if none.
func lineMsgID(line []byte) []byte {
	i := bytes.Index(line, msgIDKey)
	if i < 0 {
		return nil
	}
	rest := line[i+len(msgIDKey):]
	if len(rest) < 36 {
		return nil
	}
	return rest[:36]
}
