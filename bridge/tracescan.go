package bridge

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
	"unicode/utf8"
)

// Reading a trace back from the audit log. The log only grows, so a trace
// reads a bounded window from its end: the newest TraceWindow bytes of
// audit.log and, if the window is not used up, of audit.log.1 (where
// logrotate moves it). Two passes over the window: the first finds the
// msgIds of the conversation (records carrying the id as traceId, msgId or
// corr), the second every record of those msgIds — a hop that carries no
// traceId (a held message's expiry) is found by its msgId.

// TraceWindow bounds how much of the audit log one trace reads on one
// host: at about 370 bytes a record, the last ~180 000 hops (reading
// them takes about a quarter of a second: BenchmarkScanAudit).
const TraceWindow = 64 << 20

// TraceMaxHops bounds the hops one host reports for one id (the earliest
// are kept); it keeps an answer well under MaxBodyBytes.
const TraceMaxHops = 1000

// traceVerdictBytes bounds a hop's verdict in a trace (a publish error can
// be long; the trace needs its gist).
const traceVerdictBytes = 200

// traceLineBytes bounds one audit line a trace reads; longer lines are not
// records this build wrote, and are skipped.
const traceLineBytes = 64 << 10

// TraceScope says how far back one host's search reached.
type TraceScope struct {
	Files []string  `json:"files"`           // the log files read (base names), oldest first
	Bytes int64     `json:"bytes"`           // how many bytes of them were read
	Since time.Time `json:"since,omitempty"` // the oldest record read: hops before it are not seen
	Whole bool      `json:"whole"`           // the whole log was read: nothing older exists
}

// logWindow is the part of one log file a trace reads: [from, to).
type logWindow struct {
	path     string
	from, to int64
}

// auditWindows lays the window over path and its rotated predecessor,
// newest bytes first, and returns them oldest first (the order to read).
func auditWindows(path string, budget int64) ([]logWindow, TraceScope, error) {
	var ws []logWindow
	scope := TraceScope{Whole: true}
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
	br := bufio.NewReaderSize(io.LimitReader(f, w.to-start), traceLineBytes)
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

// ScanAudit reads the hops of id — a traceId or a msgId, in canonical
// form — from the audit log at path, at most window bytes back: the
// records carrying id as traceId, msgId or corr, and every record of their
// msgIds. Hops are in the log's order; truncated means more than
// TraceMaxHops matched and the earliest were kept.
func ScanAudit(path, id string, window int64) (hops []AuditRecord, scope TraceScope, truncated bool, err error) {
	ws, scope, err := auditWindows(path, window)
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
				var r AuditRecord
				if json.Unmarshal(line, &r) == nil {
					scope.Since = r.At
				}
			}
			if !bytes.Contains(line, needle) {
				return
			}
			var r AuditRecord
			if json.Unmarshal(line, &r) != nil || r.MsgID == "" || r.TraceID != id && r.MsgID != id && r.Corr != id || ids[r.MsgID] {
				return
			}
			if len(ids) > TraceMaxHops { // each message has a hop: more would not be listed
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
			var r AuditRecord
			if json.Unmarshal(line, &r) != nil || !ids[r.MsgID] {
				return
			}
			if len(hops) == TraceMaxHops {
				truncated = true
				return
			}
			r.Verdict = clipUTF8(r.Verdict, traceVerdictBytes)
			hops = append(hops, r)
		})
		if err != nil {
			return nil, scope, false, err
		}
	}
	return hops, scope, truncated, nil
}

// msgIDKey is how an AuditRecord's msgId starts on its line.
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

// clipUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
