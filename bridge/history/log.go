package history

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The writer: Add only queues a record (bounded in count and in body
// bytes), one goroutine (Run) encodes and appends them, so the caller
// never waits for the disk. A full queue drops the record and counts it
// rather than slow the caller.

// Config says where and how much history is kept.
type Config struct {
	Dir string // holds the files
	// MaxBytes caps one file: past it the oldest entries go, down to
	// three quarters of it (default DefaultMaxBytes).
	MaxBytes int64
	// MaxAge: older entries are dropped from the file at its next
	// compaction (default DefaultMaxAge).
	MaxAge time.Duration
}

// The caps a Config gets when it names none.
const (
	DefaultMaxBytes = 16 << 20
	DefaultMaxAge   = 30 * 24 * time.Hour
)

func (c *Config) defaults() {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
}

const (
	queueLen   = 4096     // records queued for the writer, at most
	queueBytes = 64 << 20 // bodies queued for the writer, at most
	batchLen   = 256      // records the writer takes at once
	openFiles  = 64       // files kept open between batches
)

// item is one record queued for the writer, or (flush set) a marker
// closed once everything queued before it is written.
type item struct {
	name  string // the entity's name: its file
	e     Entry  // without Body, FromName and ToName: the writer fills them
	body  []byte // never written to by the caller after Add
	flush chan struct{}
}

// Log is the history writer and reader. Its io lock is a leaf: it is held
// only around file I/O (a batch, a read, a compaction, a purge), never
// while names is called.
type Log struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	names   func(id string) string
	in      chan item
	pending atomic.Int64 // body bytes queued
	dropped atomic.Uint64
	stopped chan struct{} // closed when Run returns: nothing is written any more

	io    sync.Mutex
	files map[string]*file // by name (io held)
}

// file is an open history file.
type file struct {
	f      *os.File
	size   int64
	oldest time.Time // of its first entry; zero: empty
}

// New is a writer for cfg.Dir. names gives an entry's FromName and ToName
// from its From and To; the writer goroutine calls it, off the caller's
// path and outside the io lock.
func New(cfg Config, log *slog.Logger, now func() time.Time, names func(id string) string) *Log {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Log{cfg: cfg, log: log, now: now, names: names, in: make(chan item, queueLen),
		files: map[string]*file{}, stopped: make(chan struct{})}
}

// Add queues e, with body as its body, for name's file; never blocks.
func (l *Log) Add(name string, e Entry, body []byte) {
	n := int64(len(body))
	if l.pending.Add(n) > queueBytes {
		l.pending.Add(-n)
		l.drop(name)
		return
	}
	select {
	case l.in <- item{name: name, e: e, body: body}:
	default:
		l.pending.Add(-n)
		l.drop(name)
	}
}

func (l *Log) drop(name string) {
	if n := l.dropped.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th, …
		l.log.Warn("history: writer behind, a record was dropped", "entity", name, "dropped", n)
	}
}

// Dropped is how many records were dropped because the writer was behind.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Flush returns once everything queued before it is written (or the
// writer has stopped: then nothing more will be).
func (l *Log) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case l.in <- item{flush: done}:
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
	case <-l.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Run writes what is queued until ctx ends, then what is left.
func (l *Log) Run(ctx context.Context) {
	defer close(l.stopped)
	defer l.closeFiles()
	for {
		select {
		case it := <-l.in:
			l.writeBatch(l.collect(it))
		case <-ctx.Done():
			for {
				select {
				case it := <-l.in:
					l.writeBatch(l.collect(it))
				default:
					return
				}
			}
		}
	}
}

// collect is first and what else is queued, up to a batch.
func (l *Log) collect(first item) []item {
	batch := []item{first}
	for len(batch) < batchLen {
		select {
		case it := <-l.in:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch encodes a batch (names resolved before the io lock is taken),
// appends each file's lines in one write, then releases the flushes.
func (l *Log) writeBatch(batch []item) {
	lines := map[string][]byte{}
	var order []string
	var flushes []chan struct{}
	for i := range batch {
		it := &batch[i]
		if it.flush != nil {
			flushes = append(flushes, it.flush)
			continue
		}
		l.pending.Add(-int64(len(it.body)))
		if _, ok := lines[it.name]; !ok {
			order = append(order, it.name)
		}
		it.e.Body, it.e.FromName, it.e.ToName = string(it.body), l.names(it.e.From), l.names(it.e.To)
		lines[it.name] = AppendLine(lines[it.name], &it.e)
	}
	l.io.Lock()
	for _, name := range order {
		if err := l.appendLines(name, lines[name]); err != nil {
			l.log.Warn("history: write failed", "entity", name, "bytes", len(lines[name]), "err", err)
		}
	}
	if len(l.files) > openFiles {
		l.closeFilesLocked()
	}
	l.io.Unlock()
	for _, f := range flushes {
		close(f)
	}
}
