package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files: opened for appending with a torn tail cut first, compacted
// to the caps by a rewrite renamed over the old file, read whole, purged.

// appendLines appends to name's file, then keeps it within its caps (io held).
func (l *Log) appendLines(name string, b []byte) error {
	hf, err := l.open(name)
	if err != nil {
		return err
	}
	n, err := hf.f.Write(b)
	hf.size += int64(n)
	if err != nil {
		return err
	}
	if hf.oldest.IsZero() {
		if es, _ := Parse(b); len(es) > 0 {
			hf.oldest = es[0].TS
		}
	}
	overAge := !hf.oldest.IsZero() && l.now().Sub(hf.oldest) > l.cfg.MaxAge+l.cfg.MaxAge/10
	if hf.size > l.cfg.MaxBytes || overAge {
		return l.compact(name)
	}
	return nil
}

// path is name's history file.
func (l *Log) path(name string) string { return filepath.Join(l.cfg.Dir, name+".jsonl") }

// open returns name's file open for appending, its torn tail (a crash
// mid-write) cut first so the next line starts on a line of its own (io held).
func (l *Log) open(name string) (*file, error) {
	if hf := l.files[name]; hf != nil {
		return hf, nil
	}
	if err := os.MkdirAll(l.cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	p := l.path(name)
	data, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if torn := tornTail(data); torn > 0 {
		l.log.Warn("history: a torn last line was cut (a crash mid-write)", "entity", name, "bytes", torn)
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
	hf := &file{f: f, size: int64(len(data))}
	if es, _ := Parse(data); len(es) > 0 {
		hf.oldest = es[0].TS
	}
	l.files[name] = hf
	return hf, nil
}

// compact rewrites name's file without the entries past MaxAge and, past
// MaxBytes, without the oldest down to three quarters of it: a new file
// renamed over the old, so a crash leaves one or the other whole (io held).
func (l *Log) compact(name string) error {
	l.closeFile(name)
	p := l.path(name)
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	entries, _ := Parse(data)
	kept := keepRecent(entries, l.now().Add(-l.cfg.MaxAge), l.cfg.MaxBytes*3/4)
	var out []byte
	for i := range kept {
		out = AppendLine(out, &kept[i])
	}
	tmp := p + ".tmp"
	if err := writeFileSync(tmp, out); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	l.log.Info("history: compacted", "entity", name, "kept", len(kept), "dropped", len(entries)-len(kept), "bytes", len(out))
	return nil
}

// keepRecent is the entries newer than cutoff whose lines fit in budget,
// the newest kept first.
func keepRecent(entries []Entry, cutoff time.Time, budget int64) []Entry {
	start, size := len(entries), int64(0)
	for start > 0 {
		e := &entries[start-1]
		n := int64(len(AppendLine(nil, e)))
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

func (l *Log) closeFile(name string) {
	if hf := l.files[name]; hf != nil {
		_ = hf.f.Close()
		delete(l.files, name)
	}
}

func (l *Log) closeFilesLocked() {
	for name := range l.files {
		l.closeFile(name)
	}
}

func (l *Log) closeFiles() {
	l.io.Lock()
	l.closeFilesLocked()
	l.io.Unlock()
}

// Read returns name's entries, in file order, and how many lines were
// skipped; no file is no entries (io taken).
func (l *Log) Read(name string) ([]Entry, int, error) {
	l.io.Lock()
	defer l.io.Unlock()
	data, err := os.ReadFile(l.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	es, skipped := Parse(data)
	return es, skipped, nil
}

// Purge deletes name's file, or every file with name "", and says how
// many it deleted (io taken). Flush first: a record queued before it
// could land after it.
func (l *Log) Purge(name string) (int, error) {
	l.io.Lock()
	defer l.io.Unlock()
	if name == "" {
		l.closeFilesLocked()
	} else {
		l.closeFile(name)
	}
	return PurgeFiles(l.cfg.Dir, name)
}

// PurgeFiles deletes the history file called name in dir, or every one
// (and any compaction left half done) with name "", and says how many it
// deleted. A running writer purges through its Log (it may hold the
// files open).
func PurgeFiles(dir, name string) (int, error) {
	if name != "" {
		if strings.ContainsAny(name, `/\`) {
			return 0, fmt.Errorf("purge history: %q is not a file name", name)
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
