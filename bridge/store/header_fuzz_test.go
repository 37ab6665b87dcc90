package store

import (
	"encoding/binary"
	"hash/fnv"
	"testing"
)

// validHead is the first two pages of a fresh bbolt file: two meta pages
// with page size ps, root page 3, freelist page 2, 4 pages in use.
func validHead(ps int) []byte {
	b := make([]byte, 2*ps)
	for i := 0; i < 2; i++ {
		p := b[i*ps:]
		le := binary.LittleEndian
		le.PutUint64(p[0:], uint64(i))
		le.PutUint16(p[8:], flagMeta)
		m := p[pageHeaderSize:]
		le.PutUint32(m[0:], boltMagic)
		le.PutUint32(m[4:], boltVersion)
		le.PutUint32(m[8:], uint32(ps))
		le.PutUint64(m[16:], 3)
		le.PutUint64(m[32:], 2)
		le.PutUint64(m[40:], 4)
		le.PutUint64(m[48:], uint64(i))
		h := fnv.New64a()
		h.Write(m[:56])
		le.PutUint64(m[56:], h.Sum64())
	}
	return b
}

func TestParseHeader(t *testing.T) {
	head := validHead(4096)
	if h, err := ParseHeader(head, 4*4096); err != nil || h.PageSize != 4096 || h.HighMark != 4 || h.Meta != 1 {
		t.Fatalf("valid: %+v %v", h, err)
	}
	if _, err := ParseHeader(head, 2*4096); err == nil {
		t.Fatal("a file shorter than its pages in use passed")
	}
	if _, err := ParseHeader(head, 4*4096+100); err == nil {
		t.Fatal("a file of part pages passed")
	}
	bad := append([]byte(nil), head...)
	bad[4096+16+20] ^= 1 // meta 1's root: checksum fails, meta 0 is used
	if h, err := ParseHeader(bad, 4*4096); err != nil || h.Meta != 0 {
		t.Fatalf("one bad meta: %+v %v", h, err)
	}
	bad[16] ^= 1
	if _, err := ParseHeader(bad, 4*4096); err == nil {
		t.Fatal("two bad metas passed")
	}
}

// FuzzParseHeader: the header parser reads untrusted files; it must never
// panic, and what it accepts must lie inside the file.
func FuzzParseHeader(f *testing.F) {
	f.Add(validHead(4096), int64(4*4096))
	f.Add(validHead(1024), int64(4*1024))
	f.Add([]byte{}, int64(0))
	f.Add([]byte("not a bbolt file"), int64(16))
	f.Fuzz(func(t *testing.T, head []byte, size int64) {
		h, err := ParseHeader(head, size)
		if err != nil {
			return
		}
		if size <= 0 || size%int64(h.PageSize) != 0 || h.HighMark*uint64(h.PageSize) > uint64(size) || h.Root >= h.HighMark {
			t.Fatalf("accepted %+v for a %d-byte file", h, size)
		}
		_ = checkFreelistPage(head, h)
	})
}
