package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RepairResult is what RepairFile did to one store file.
type RepairResult struct {
	Path    string
	Missing bool   // there was no file: nothing to repair
	Damaged bool   // false: the file checked healthy and was left as it is
	Reason  string // the damage found
	Aside   string // where the damaged file now is
	// Kept counts the keys copied into the fresh file per top-level bucket.
	Kept map[string]int
	// Lost says what could not be read: damaged pages and the key ranges
	// they covered, records the store's own fix-up dropped.
	Lost []string
}

// String is the result for people.
func (r RepairResult) String() string {
	var b strings.Builder
	switch {
	case r.Missing:
		fmt.Fprintf(&b, "%s: missing, nothing to repair\n", r.Path)
		return b.String()
	case !r.Damaged:
		fmt.Fprintf(&b, "%s: healthy, left as it is\n", r.Path)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: damaged (%s)\n", r.Path, r.Reason)
	fmt.Fprintf(&b, "  kept aside as %s\n", r.Aside)
	names := make([]string, 0, len(r.Kept))
	for k := range r.Kept {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) == 0 {
		b.WriteString("  kept: nothing readable\n")
	}
	for _, k := range names {
		fmt.Fprintf(&b, "  kept: %d record(s) in %s\n", r.Kept[k], k)
	}
	for _, l := range r.Lost {
		fmt.Fprintf(&b, "  lost: %s\n", l)
	}
	return b.String()
}

// FixFunc adapts a salvaged file to its store's invariants (counters,
// records that do not decode), inside tx, noting what it drops in r.
type FixFunc func(tx *bolt.Tx, r *RepairResult) error

// RepairFile repairs the store file at path when CheckFile finds it
// damaged: whatever is readable is copied key by key into a fresh file
// (fix then restores the store's own invariants), the damaged file is
// renamed aside with a timestamp suffix and the fresh one takes its name.
// A healthy or missing file is left alone. A file a running gateway holds
// is an error. Nothing is ever deleted.
func RepairFile(path string, now time.Time, fix FixFunc) (RepairResult, error) {
	r := RepairResult{Path: path, Kept: map[string]int{}}
	fi, err := CheckFile(path)
	var de *DamageError
	switch {
	case errors.As(err, &de):
		r.Damaged, r.Reason = true, de.Reason
	case err != nil:
		return r, err
	case fi.Missing:
		r.Missing = true
		return r, nil
	default:
		return r, nil
	}
	fresh := path + ".repairing"
	if err := os.Remove(fresh); err != nil && !errors.Is(err, os.ErrNotExist) {
		return r, err
	}
	if err := salvage(path, fresh, fix, &r); err != nil {
		os.Remove(fresh)
		return r, fmt.Errorf("repair %s: %w", path, err)
	}
	r.Aside = path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, r.Aside); err != nil {
		os.Remove(fresh)
		return r, err
	}
	if err := os.Rename(fresh, path); err != nil {
		return r, fmt.Errorf("repair %s: the damaged file is at %s, the salvaged one at %s: %w", path, r.Aside, fresh, err)
	}
	syncDir(filepath.Dir(path))
	return r, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// salvage copies what is readable of src into a new file dst. It works on
// a copy of src, padded to the pages its meta page counts, so that bbolt
// reads zeros (a page it refuses, guarded) rather than past the end of a
// truncated file.
func salvage(src, dst string, fix FixFunc, r *RepairResult) error {
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer out.Close()
	work, ok, err := workCopy(src, dst+".work", r)
	if err != nil {
		return err
	}
	if !ok {
		return out.Update(func(tx *bolt.Tx) error { return fix(tx, r) })
	}
	defer os.Remove(work)
	in, err := openGuarded(work)
	if err != nil {
		r.Lost = append(r.Lost, fmt.Sprintf("everything: the file cannot be opened (%v)", err))
		return out.Update(func(tx *bolt.Tx) error { return fix(tx, r) })
	}
	defer in.Close()
	return out.Update(func(otx *bolt.Tx) error {
		var names [][]byte
		err := guard(func() error {
			return in.View(func(itx *bolt.Tx) error {
				lost := func(what string) { r.Lost = append(r.Lost, what) }
				copyKeys(func() *bolt.Cursor { return itx.Cursor() }, "", lost, func(k, v []byte) {
					if v == nil {
						names = append(names, k) // a top-level bucket
					}
				})
				for _, name := range names {
					dstB, err := otx.CreateBucketIfNotExists(name)
					if err != nil {
						return err
					}
					n := copyBucket(itx, name, dstB, string(name), lost)
					r.Kept[string(name)] = n
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		return fix(otx, r)
	})
}

// workCopy copies src to work, padded with zero pages up to the pages its
// meta page counts. ok is false when no meta page is readable (nothing can
// be salvaged: the reason is in r).
func workCopy(src, work string, r *RepairResult) (string, bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	head := make([]byte, min(st.Size(), 2*maxPageSize))
	if _, err := io.ReadFull(f, head); err != nil {
		return "", false, err
	}
	m, _, err := pickMeta(head)
	if err != nil {
		if st.Size() == 0 {
			r.Lost = append(r.Lost, "everything: the file was empty")
		} else {
			r.Lost = append(r.Lost, fmt.Sprintf("everything: %v", err))
		}
		return "", false, nil
	}
	w, err := os.OpenFile(work, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return "", false, err
	}
	defer w.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", false, err
	}
	if _, err := io.Copy(w, f); err != nil {
		return "", false, err
	}
	ps := int64(m.pageSize)
	size := (st.Size() + ps - 1) / ps * ps
	if want := int64(m.pgid) * ps; want > size && m.pgid < 1<<40/uint64(ps) {
		size = want
	}
	if size > st.Size() {
		r.Lost = append(r.Lost, fmt.Sprintf("pages past byte %d: the file ends there", st.Size()))
	}
	if err := w.Truncate(size); err != nil {
		return "", false, err
	}
	return work, true, nil
}

// copyBucket copies the bucket at name (under itx's root) into dst,
// recursively, and returns how many keys it copied.
func copyBucket(itx *bolt.Tx, name []byte, dst *bolt.Bucket, path string, lost func(string)) int {
	var src *bolt.Bucket
	if err := recovered(func() { src = itx.Bucket(name) }); err != nil || src == nil {
		lost(fmt.Sprintf("bucket %s: unreadable", path))
		return 0
	}
	return copyInto(src, dst, path, lost)
}

func copyInto(src, dst *bolt.Bucket, path string, lost func(string)) int {
	var seq uint64
	if recovered(func() { seq = src.Sequence() }) == nil {
		_ = dst.SetSequence(seq)
	}
	n := 0
	var subs [][]byte
	copyKeys(func() *bolt.Cursor { return src.Cursor() }, path, lost, func(k, v []byte) {
		if v == nil {
			subs = append(subs, k)
			return
		}
		if dst.Put(k, v) == nil {
			n++
		}
	})
	for _, k := range subs {
		sub := string(k)
		var s *bolt.Bucket
		if err := recovered(func() { s = src.Bucket(k) }); err != nil || s == nil {
			lost(fmt.Sprintf("bucket %s/%q: unreadable", path, sub))
			continue
		}
		d, err := dst.CreateBucketIfNotExists(k)
		if err != nil {
			lost(fmt.Sprintf("bucket %s/%q: %v", path, sub, err))
			continue
		}
		n += copyInto(s, d, path+"/"+fmt.Sprintf("%q", sub), lost)
	}
	return n
}

// copyKeys reads the keys of a cursor's bucket in order, handing each
// (copied; v nil for a sub-bucket) to put; on a damaged page it reads back
// from the end down to the last key it had, and reports the range it
// could not read.
func copyKeys(cursor func() *bolt.Cursor, path string, lost func(string), put func(k, v []byte)) {
	var last []byte
	have := false
	fwd := recovered(func() {
		c := cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			put(clone(k), cloneVal(v))
			last, have = clone(k), true
		}
	})
	if fwd == nil {
		return
	}
	var first []byte
	back := recovered(func() {
		c := cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if have && string(k) <= string(last) {
				return
			}
			put(clone(k), cloneVal(v))
			first = clone(k)
		}
	})
	where := "bucket " + path
	if path == "" {
		where = "the bucket directory"
	}
	switch {
	case back != nil && !have && first == nil:
		lost(fmt.Sprintf("%s: everything, its first page is unreadable (%v)", where, fwd))
	case back != nil:
		lost(fmt.Sprintf("%s: keys after %s, from a damaged page (%v)", where, keyText(last, have), fwd))
	default:
		lost(fmt.Sprintf("%s: keys between %s and %s, on a damaged page (%v)", where, keyText(last, have), keyText(first, first != nil), fwd))
	}
}

func keyText(k []byte, ok bool) string {
	if !ok {
		return "the start"
	}
	if len(k) > 40 {
		k = k[:40]
	}
	return fmt.Sprintf("%q", k)
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

func cloneVal(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// recovered runs f, turning a panic (a fault, on a goroutine that set
// debug.SetPanicOnFault) into an error.
func recovered(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	debug.SetPanicOnFault(true)
	f()
	return nil
}
