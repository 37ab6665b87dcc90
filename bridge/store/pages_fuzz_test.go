package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// smallStore is the bytes of a bbolt file with nested, inline and
// multi-page buckets.
func smallStore(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		a, _ := tx.CreateBucketIfNotExists([]byte("a"))
		for i := 0; i < 60; i++ {
			_ = a.Put([]byte(fmt.Sprintf("k%03d", i)), bytes.Repeat([]byte{'v'}, 40))
		}
		b, _ := tx.CreateBucketIfNotExists([]byte("b"))
		in, _ := b.CreateBucketIfNotExists([]byte("inline"))
		_ = in.Put([]byte("x"), []byte("y"))
		_ = b.Put([]byte("big"), bytes.Repeat([]byte{'z'}, 3000))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestWalkPages(t *testing.T) {
	raw := smallStore(t)
	h, err := ParseHeader(raw, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if err := walkPages(bytes.NewReader(raw), h); err != nil {
		t.Fatalf("a healthy file: %v", err)
	}
	// a branch or leaf pointing at itself, as a flipped byte can make it
	bad := append([]byte(nil), raw...)
	root := h.Root * uint64(h.PageSize)
	copy(bad[root:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	if err := walkPages(bytes.NewReader(bad), h); err == nil {
		t.Fatal("a root page that is not itself passed")
	}
}

// FuzzWalkPages: the page walker reads untrusted files: it must never
// panic, loop or read outside the pages in use, whatever the bytes of the
// data pages (the meta pages are kept valid, so the fuzzer reaches them).
func FuzzWalkPages(f *testing.F) {
	seed := smallStore(f)
	h, err := ParseHeader(seed, int64(len(seed)))
	if err != nil {
		f.Fatal(err)
	}
	metas := seed[:2*h.PageSize]
	f.Add(seed[2*h.PageSize:])
	f.Fuzz(func(t *testing.T, body []byte) {
		raw := make([]byte, len(seed))
		copy(raw, metas)
		copy(raw[len(metas):], body)
		_ = walkPages(bytes.NewReader(raw), h)
	})
}
