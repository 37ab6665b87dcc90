// Package storedamage damages bbolt store files the way disks and crashes
// do, for the tests that prove a gateway refuses them and `herdbridge
// repair` salvages them. It reads the file's raw page layout (it must not
// import bbolt: only the store packages may).
package storedamage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
)

// Kinds are the damages Apply knows, in the order tests run them.
var Kinds = []string{"zero-length", "half-truncated", "flipped-bytes"}

// Apply damages the file at path: "zero-length" truncates it to nothing,
// "half-truncated" to half the pages it uses, "flipped-bytes" inverts the first
// element headers of the in-use leaf page whose values hold the most bytes
// (a page of messages: not a meta, free or root page).
func Apply(path, kind string) error { return ApplyTo(path, kind, nil) }

// ApplyTo is Apply, with "flipped-bytes" choosing among the pages that
// contain marker (nil: any), so a test damages the page of its messages.
func ApplyTo(path, kind string, marker []byte) error {
	switch kind {
	case "zero-length":
		return os.Truncate(path, 0)
	case "half-truncated":
		// half of the pages in use: bbolt grows a file ahead of what it
		// uses, so half of the file's size can leave every used page
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		ps, hwm, _, err := inUse(b)
		if err != nil {
			return err
		}
		return os.Truncate(path, int64(hwm/2*ps))
	case "flipped-bytes":
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		off, err := busiestLeaf(b, marker)
		if err != nil {
			return err
		}
		for i := off + 16; i < off+16+32; i++ {
			b[i] ^= 0xFF
		}
		return os.WriteFile(path, b, 0o600)
	}
	return fmt.Errorf("storedamage: unknown kind %q", kind)
}

// busiestLeaf is the offset of the in-use leaf page with the most value bytes.
func busiestLeaf(b, marker []byte) (int, error) {
	le := binary.LittleEndian
	ps, hwm, m, err := inUse(b)
	if err != nil {
		return 0, err
	}
	root := int(le.Uint64(b[m+16+16:])) // the bucket directory, not data
	free := map[uint64]bool{}
	if fl := le.Uint64(b[m+16+32:]); fl != ^uint64(0) {
		p := b[int(fl)*ps:]
		n, ids := int(le.Uint16(p[10:])), p[16:]
		if n == 0xFFFF {
			n, ids = int(le.Uint64(ids)), ids[8:]
		}
		for i := 0; i < n; i++ {
			free[le.Uint64(ids[i*8:])] = true
		}
	}
	best, bestN := -1, 0
	for id := 2; id < hwm && (id+1)*ps <= len(b); id++ {
		p := b[id*ps:]
		if id == root || free[uint64(id)] || le.Uint64(p) != uint64(id) || le.Uint16(p[8:]) != 0x02 ||
			marker != nil && !bytes.Contains(p[:ps], marker) {
			continue
		}
		// weigh by the bytes of values the page's elements carry: the
		// page of messages, not of small bookkeeping records
		n, size := int(le.Uint16(p[10:])), 0
		for i := 0; i < n && 16+i*16+16 <= ps; i++ {
			size += int(le.Uint32(p[16+i*16+12:]))
		}
		if size > bestN {
			best, bestN = id, size
		}
		id += int(le.Uint32(p[12:])) // skip its overflow pages
	}
	if best < 0 {
		return 0, fmt.Errorf("storedamage: no leaf page in use")
	}
	return best * ps, nil
}

// inUse reads the page size, the pages in use and the offset of the meta
// page in force (the one with the higher txid) of a healthy file.
func inUse(b []byte) (ps, hwm, meta int, err error) {
	le := binary.LittleEndian
	if len(b) < 4096*2 {
		return 0, 0, 0, fmt.Errorf("storedamage: file too short")
	}
	ps = int(le.Uint32(b[16+8:]))
	if le.Uint64(b[ps+16+48:]) > le.Uint64(b[16+48:]) {
		meta = ps
	}
	return ps, int(le.Uint64(b[meta+16+40:])), meta, nil
}
