package bridge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// History: an opt-in transcript per entity of the messages it sent and
// received, bodies included (they are its own), kept by its own gateway in
// <Dir>/<name>.jsonl (mode 0600, historyfile.go), capped by size and age,
// read by bridge_history without consuming anything. The send and
// delivery paths only queue a record: one writer goroutine encodes and
// appends them, so a send never waits for the disk. A full queue drops
// the record and counts it rather than slow the send.

// HistoryConfig says where and how much history is kept.
type HistoryConfig struct {
	// Dir holds the history files; empty: no history on this gateway.
	Dir string
	// All keeps every local entity's history (--history); otherwise only
	// the entities registered with history on.
	All bool
	// MaxBytes caps one entity's file (default 16 MiB): past it the oldest
	// entries go, down to three quarters of it.
	MaxBytes int64
	// MaxAge: older entries are not returned, and are dropped from the
	// file (default 30 days).
	MaxAge time.Duration
}

func (h *HistoryConfig) defaults() {
	if h.MaxBytes <= 0 {
		h.MaxBytes = 16 << 20
	}
	if h.MaxAge <= 0 {
		h.MaxAge = 30 * 24 * time.Hour
	}
}

const (
	historyQueue      = 4096     // records queued for the writer, at most
	historyQueueBytes = 64 << 20 // bodies queued for the writer, at most
	historyBatch      = 256      // records the writer takes at once
	historyOpenFiles  = 64       // files kept open between batches
)

// historyKinds are the kinds a history keeps: messages, and the notices
// an entity drains (never a receipt such as INJECTED).
var historyKinds = map[Kind]bool{KindSend: true, KindAsk: true, KindReply: true, KindAnswer: true, KindBroadcast: true,
	KindFailed: true, KindAbandoned: true, KindTooLate: true, KindNoWaiter: true, KindMissedAsk: true}

// histItem is one record queued for the writer, or (flush set) a marker
// closed once everything queued before it is written.
type histItem struct {
	name  string // the entity's name: its file
	dir   string
	at    time.Time
	env   Envelope // a shallow copy: the body is never written to after publish
	flush chan struct{}
}

// historyLog is the history writer. Its io lock is a leaf: it is held
// only around file I/O (a batch, a read, a compaction, a purge).
type historyLog struct {
	cfg     HistoryConfig
	log     *slog.Logger
	now     func() time.Time
	names   func(gid string) string
	in      chan histItem
	pending atomic.Int64 // body bytes queued
	dropped atomic.Uint64
	stopped chan struct{} // closed when run returns: nothing is written any more

	io    leafMutex
	files map[string]*histFile // by name (io held)
}

// histFile is an open history file.
type histFile struct {
	f      *os.File
	size   int64
	oldest time.Time // of its first entry; zero: empty
}

func newHistoryLog(cfg HistoryConfig, log *slog.Logger, now func() time.Time, names func(string) string) *historyLog {
	cfg.defaults()
	return &historyLog{cfg: cfg, log: log, now: now, names: names, in: make(chan histItem, historyQueue),
		files: map[string]*histFile{}, stopped: make(chan struct{})}
}

// add queues env for name's history; never blocks.
func (h *historyLog) add(name, dir string, env *Envelope) {
	n := int64(len(env.Body))
	if h.pending.Add(n) > historyQueueBytes {
		h.pending.Add(-n)
		h.drop(name)
		return
	}
	select {
	case h.in <- histItem{name: name, dir: dir, at: h.now(), env: *env}:
	default:
		h.pending.Add(-n)
		h.drop(name)
	}
}

func (h *historyLog) drop(name string) {
	if n := h.dropped.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th, …
		h.log.Warn("history: writer behind, a record was dropped", "entity", name, "dropped", n)
	}
}

// flush returns once everything queued before it is written (or the
// writer has stopped: then nothing more will be).
func (h *historyLog) flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case h.in <- histItem{flush: done}:
	case <-h.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
	case <-h.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// run writes what is queued until ctx ends, then what is left.
func (h *historyLog) run(ctx context.Context) {
	defer close(h.stopped)
	defer h.closeFiles()
	for {
		select {
		case it := <-h.in:
			h.writeBatch(h.collect(it))
		case <-ctx.Done():
			for {
				select {
				case it := <-h.in:
					h.writeBatch(h.collect(it))
				default:
					return
				}
			}
		}
	}
}

// collect is first and what else is queued, up to a batch.
func (h *historyLog) collect(first histItem) []histItem {
	batch := []histItem{first}
	for len(batch) < historyBatch {
		select {
		case it := <-h.in:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch encodes a batch (names resolved before the io lock is taken),
// appends each file's lines in one write, then releases the flushes.
func (h *historyLog) writeBatch(batch []histItem) {
	lines := map[string][]byte{}
	var order []string
	var flushes []chan struct{}
	for i := range batch {
		it := &batch[i]
		if it.flush != nil {
			flushes = append(flushes, it.flush)
			continue
		}
		h.pending.Add(-int64(len(it.env.Body)))
		if _, ok := lines[it.name]; !ok {
			order = append(order, it.name)
		}
		lines[it.name] = AppendHistoryLine(lines[it.name], h.entry(it))
	}
	h.io.Lock()
	for _, name := range order {
		if err := h.appendLines(name, lines[name]); err != nil {
			h.log.Warn("history: write failed", "entity", name, "bytes", len(lines[name]), "err", err)
		}
	}
	if len(h.files) > historyOpenFiles {
		h.closeFilesLocked()
	}
	h.io.Unlock()
	for _, f := range flushes {
		close(f)
	}
}

func (h *historyLog) entry(it *histItem) *HistoryEntry {
	e := &it.env
	ts := e.TS
	if it.dir == HistoryIn {
		ts = it.at
	}
	return &HistoryEntry{TS: ts.UTC(), Dir: it.dir, Kind: e.Kind, MsgID: e.MsgID, From: e.From, FromName: h.names(e.From),
		To: e.To, ToName: h.names(e.To), Body: string(e.Body), TurnID: e.TurnID, Corr: e.Corr, TraceID: e.TraceID}
}

// appendLines appends to name's file, then keeps it within its caps (io held).
func (h *historyLog) appendLines(name string, b []byte) error {
	hf, err := h.open(name)
	if err != nil {
		return err
	}
	n, err := hf.f.Write(b)
	hf.size += int64(n)
	if err != nil {
		return err
	}
	if hf.oldest.IsZero() {
		if es, _ := ParseHistory(b); len(es) > 0 {
			hf.oldest = es[0].TS
		}
	}
	overAge := !hf.oldest.IsZero() && h.now().Sub(hf.oldest) > h.cfg.MaxAge+h.cfg.MaxAge/10
	if hf.size > h.cfg.MaxBytes || overAge {
		return h.compact(name)
	}
	return nil
}

// path is name's history file.
func (h *historyLog) path(name string) string { return filepath.Join(h.cfg.Dir, name+".jsonl") }

// open returns name's file open for appending, its torn tail (a crash
// mid-write) cut first so the next line starts on a line of its own (io held).
func (h *historyLog) open(name string) (*histFile, error) {
	if hf := h.files[name]; hf != nil {
		return hf, nil
	}
	if err := os.MkdirAll(h.cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	p := h.path(name)
	data, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if torn := tornTail(data); torn > 0 {
		h.log.Warn("history: a torn last line was cut (a crash mid-write)", "entity", name, "bytes", torn)
		data = data[:len(data)-torn]
		if err := os.Truncate(p, int64(len(data))); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	hf := &histFile{f: f, size: int64(len(data))}
	if es, _ := ParseHistory(data); len(es) > 0 {
		hf.oldest = es[0].TS
	}
	h.files[name] = hf
	return hf, nil
}

// compact rewrites name's file without the entries past MaxAge and, past
// MaxBytes, without the oldest down to three quarters of it: a new file
// renamed over the old, so a crash leaves one or the other whole (io held).
func (h *historyLog) compact(name string) error {
	h.closeFile(name)
	p := h.path(name)
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	entries, _ := ParseHistory(data)
	kept := keepRecent(entries, h.now().Add(-h.cfg.MaxAge), h.cfg.MaxBytes*3/4)
	var out []byte
	for i := range kept {
		out = AppendHistoryLine(out, &kept[i])
	}
	tmp := p + ".tmp"
	if err := writeFileSync(tmp, out); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	h.log.Info("history: compacted", "entity", name, "kept", len(kept), "dropped", len(entries)-len(kept), "bytes", len(out))
	return nil
}

// keepRecent is the entries newer than cutoff whose lines fit in budget,
// the newest kept first.
func keepRecent(entries []HistoryEntry, cutoff time.Time, budget int64) []HistoryEntry {
	start, size := len(entries), int64(0)
	for start > 0 {
		e := &entries[start-1]
		n := int64(len(AppendHistoryLine(nil, e)))
		if e.TS.Before(cutoff) || size+n > budget {
			break
		}
		size += n
		start--
	}
	return entries[start:]
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (h *historyLog) closeFile(name string) {
	if hf := h.files[name]; hf != nil {
		_ = hf.f.Close()
		delete(h.files, name)
	}
}

func (h *historyLog) closeFilesLocked() {
	for name := range h.files {
		h.closeFile(name)
	}
}

func (h *historyLog) closeFiles() {
	h.io.Lock()
	h.closeFilesLocked()
	h.io.Unlock()
}

// read returns name's entries and how many lines were skipped (io taken).
func (h *historyLog) read(name string) ([]HistoryEntry, int, error) {
	h.io.Lock()
	defer h.io.Unlock()
	data, err := os.ReadFile(h.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	es, skipped := ParseHistory(data)
	return es, skipped, nil
}

// purge deletes name's history, or every history with name "" (io taken).
func (h *historyLog) purge(name string) (int, error) {
	h.io.Lock()
	defer h.io.Unlock()
	if name == "" {
		h.closeFilesLocked()
	} else {
		h.closeFile(name)
	}
	return PurgeHistoryFiles(h.cfg.Dir, name)
}

// PurgeHistoryFiles deletes the history file of the entity called name in
// dir, or every one with name "", and says how many it deleted. A running
// gateway purges through its core (it may hold the files open).
func PurgeHistoryFiles(dir, name string) (int, error) {
	if name != "" {
		if !ValidName(name) {
			return 0, userErr("%s is not an entity name", Clip(name))
		}
		err := os.Remove(filepath.Join(dir, name+".jsonl"))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 1, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".jsonl") || strings.HasSuffix(e.Name(), ".jsonl.tmp") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return n, fmt.Errorf("purge history: %w", err)
			}
			n++
		}
	}
	return n, nil
}
