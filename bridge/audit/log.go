package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Log appends Records as JSON lines to a file opened O_APPEND
// (0600). Write never blocks the caller (the core calls it under its lock):
// records go through a queue to one writer goroutine, which flushes every
// FlushEvery. A crash loses at most that much of the log, never a
// message; a full queue or a failing disk drops records, counts them
// (Dropped) and logs the first failure at once.
type Log struct {
	path    string
	q       chan Record
	flushes chan chan struct{} // Flush's requests to the writer
	inBuf   uint64             // records in w not yet flushed (writer goroutine only)
	f       *os.File
	w       *bufio.Writer
	log     *slog.Logger
	dropped atomic.Uint64
	closed  atomic.Bool
	mu      sync.Mutex
	err     error
	done    chan struct{}
	once    sync.Once
}

// FlushEvery is how often buffered audit lines reach the file.
const FlushEvery = 100 * time.Millisecond

// queueLen bounds the records waiting for the writer.
const queueLen = 16384

// Open opens (creates) the append-only audit log at path.
func Open(path string, log *slog.Logger) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Log{path: path, q: make(chan Record, queueLen), flushes: make(chan chan struct{}), f: f, w: bufio.NewWriterSize(f, 64<<10), log: log, done: make(chan struct{})}
	go a.writer()
	return a, nil
}

func (a *Log) writer() {
	defer close(a.done)
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case r, ok := <-a.q:
			if !ok {
				a.fail(a.w.Flush())
				a.inBuf = 0
				return
			}
			a.write(r)
		case done := <-a.flushes:
			a.flushQueued()
			close(done)
		case <-t.C:
			if a.w.Buffered() > 0 {
				a.fail(a.w.Flush())
			}
			if a.w.Buffered() == 0 {
				a.inBuf = 0
			}
		}
	}
}

// flushQueued writes what was queued when a Flush asked, and flushes.
func (a *Log) flushQueued() {
	for n := len(a.q); n > 0; n-- {
		r, ok := <-a.q
		if !ok {
			break
		}
		a.write(r)
	}
	if a.w.Buffered() > 0 {
		a.fail(a.w.Flush())
	}
	if a.w.Buffered() == 0 {
		a.inBuf = 0
	}
}

func (a *Log) write(r Record) {
	b, err := json.Marshal(r)
	if err == nil {
		a.inBuf++
		_, err = a.w.Write(append(b, '\n'))
	}
	if err != nil {
		a.fail(err)
	}
}

// Path is the file the log appends to.
func (a *Log) Path() string { return a.path }

// Flush returns once every record written before it is in the file (a
// trace reads the log right after the hops it looks for), or when ctx ends
// or the log is closed.
func (a *Log) Flush(ctx context.Context) {
	done := make(chan struct{})
	select {
	case a.flushes <- done:
	case <-a.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// fail keeps and logs the first error; later writes keep being tried (a
// full disk may get room again) but are not logged again.
func (a *Log) fail(err error) {
	if err == nil {
		return
	}
	a.mu.Lock()
	first := a.err == nil
	if first {
		a.err = err
	}
	a.mu.Unlock()
	if first {
		a.log.Error("audit log write failed: records are being dropped (herdbridge stats counts them)", "err", err)
	}
	if a.w.Buffered() > 0 || a.inBuf > 0 {
		a.dropped.Add(max(a.inBuf, 1)) // what was buffered is lost
		a.inBuf = 0
		a.w.Reset(a.f) // a bufio.Writer that failed stays failed: start over
	}
}

// Write queues r; it never blocks. A full queue drops r (counted); after
// Close, r is dropped.
func (a *Log) Write(r Record) {
	if a.closed.Load() {
		a.dropped.Add(1)
		return
	}
	defer func() {
		if recover() != nil { // closed between the check and the send
			a.dropped.Add(1)
		}
	}()
	select {
	case a.q <- r:
	default:
		if a.dropped.Add(1) == 1 {
			a.log.Error("audit log queue full: records are being dropped (herdbridge stats counts them)")
		}
	}
}

// Dropped is how many records were lost to a full queue or a write error.
func (a *Log) Dropped() uint64 { return a.dropped.Load() }

// Err is the first write error the log met, if any.
func (a *Log) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close drains the queue, flushes and closes the file. Call it once no
// more records are written. Idempotent.
func (a *Log) Close() error {
	a.once.Do(func() {
		a.closed.Store(true)
		close(a.q)
		<-a.done
		a.fail(a.f.Close())
	})
	return a.Err()
}
