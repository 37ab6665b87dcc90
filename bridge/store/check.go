package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DamageError is a store file that must not be opened: it is damaged, or
// opening it would start a gateway silently empty. Nothing was changed.
type DamageError struct {
	Path   string
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s is damaged: %s. It was left as it is and nothing was deleted: stop any gateway on this state dir and run `herdbridge repair --state-dir %s` to salvage what is readable into a fresh file (the damaged one is kept aside)",
		e.Path, e.Reason, filepath.Dir(e.Path))
}

// FullCheckLimit is the largest file CheckFile walks page by page (bbolt's
// consistency check and a read of every key and value); a larger one gets
// the header checks only, so a start never waits minutes on a huge file.
var FullCheckLimit int64 = 1 << 30

// FileInfo is what CheckFile found in a store file.
type FileInfo struct {
	Missing bool
	Size    int64
	// Keys counts the keys (values, not sub-buckets) under each top-level
	// bucket, nested buckets included; nil when the file was too large to
	// walk.
	Keys map[string]int
}

// Empty reports whether the file holds no key at all (or is missing).
func (fi FileInfo) Empty() bool {
	if fi.Missing {
		return true
	}
	if fi.Keys == nil {
		return false // not walked: assume it holds something
	}
	for _, n := range fi.Keys {
		if n > 0 {
			return false
		}
	}
	return true
}

// CheckFile judges the bbolt file at path without trusting it: a missing
// file is FileInfo{Missing: true}; a zero-length, truncated or otherwise
// damaged one is a *DamageError. It first reads the meta and freelist
// headers itself and follows the page tree from raw bytes (so bbolt never
// meets a page number outside the file, a cycle or an element pointing
// outside its page), then (up to FullCheckLimit) opens the file read-only
// and walks every bucket, key and value and runs bbolt's consistency check,
// with panics and memory faults turned into errors. A file held by a
// running gateway is an error saying so.
func CheckFile(path string) (FileInfo, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return FileInfo{Missing: true}, nil
	}
	if err != nil {
		return FileInfo{}, err
	}
	fi := FileInfo{Size: st.Size()}
	h, err := readHeader(path, st.Size())
	if err != nil {
		return fi, &DamageError{Path: path, Reason: err.Error()}
	}
	if st.Size() > FullCheckLimit {
		return fi, nil
	}
	if err := walkFile(path, h); err != nil {
		return fi, &DamageError{Path: path, Reason: err.Error()}
	}
	db, err := openGuarded(path)
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fi, fmt.Errorf("%s is locked by another process: is a gateway already running on this state dir?", path)
		}
		return fi, &DamageError{Path: path, Reason: err.Error()}
	}
	defer db.Close()
	keys, err := walkAll(db)
	if err != nil {
		return fi, &DamageError{Path: path, Reason: err.Error()}
	}
	fi.Keys = keys
	if err := boltCheck(db); err != nil {
		return fi, &DamageError{Path: path, Reason: err.Error()}
	}
	return fi, nil
}

// readHeader reads and judges the first two pages and the freelist page.
func readHeader(path string, size int64) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	head := make([]byte, min(size, 2*maxPageSize))
	if _, err := io.ReadFull(f, head); err != nil {
		return Header{}, err
	}
	h, err := ParseHeader(head, size)
	if err != nil {
		return h, err
	}
	if h.Freelist != noFreelist {
		fl := make([]byte, pageHeaderSize+8)
		if _, err := f.ReadAt(fl, int64(h.Freelist)*int64(h.PageSize)); err != nil {
			return h, fmt.Errorf("freelist page %d: %w", h.Freelist, err)
		}
		if err := checkFreelistPage(fl, h); err != nil {
			return h, err
		}
	}
	return h, nil
}

// walkFile follows the file's page tree from raw bytes (walkPages) before
// bbolt is let near it.
func walkFile(path string, h Header) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return walkPages(f, h)
}

// guard runs f on its own goroutine with memory faults turned into panics
// and panics into errors: a damaged bbolt file must never take the process
// down.
func guard(f func() error) (err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("unreadable page (%v)", r)
			}
		}()
		err = f()
	}()
	<-done
	return err
}

func openGuarded(path string) (*bolt.DB, error) {
	var db *bolt.DB
	err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
		return err
	})
	if err != nil && db != nil {
		db.Close()
		db = nil
	}
	return db, err
}

// walkAll reads every key and value, counting keys per top-level bucket.
func walkAll(db *bolt.DB) (map[string]int, error) {
	keys := map[string]int{}
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				n, err := walkBucket(b, 0)
				keys[string(name)] = n
				if err != nil {
					return fmt.Errorf("bucket %q: %w", name, err)
				}
				return nil
			})
		})
	})
	return keys, err
}

func walkBucket(b *bolt.Bucket, depth int) (int, error) {
	if depth > 16 {
		return 0, fmt.Errorf("buckets nested deeper than any herdbridge writes")
	}
	n := 0
	var sink byte
	c := b.Cursor()
	var prev []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if prev != nil && string(k) <= string(prev) {
			return n, fmt.Errorf("keys out of order after %q", prev)
		}
		prev = append(prev[:0], k...)
		if v == nil {
			sub := b.Bucket(k)
			if sub == nil {
				return n, fmt.Errorf("key %q has no value and no bucket", k)
			}
			m, err := walkBucket(sub, depth+1)
			n += m
			if err != nil {
				return n, fmt.Errorf("bucket %q: %w", k, err)
			}
			continue
		}
		for _, x := range v { // touch every byte: a page past the end faults here, guarded
			sink ^= x
		}
		n++
	}
	_ = sink
	return n, nil
}

// boltCheck runs bbolt's own consistency check (reachable, unique, in-range
// pages), stopping at the first few errors.
func boltCheck(db *bolt.DB) error {
	return guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			var first error
			n := 0
			for err := range tx.Check() {
				if first == nil {
					first = err
				}
				n++
			}
			if n > 1 {
				return fmt.Errorf("%v (and %d more problems)", first, n-1)
			}
			return first
		})
	})
}
