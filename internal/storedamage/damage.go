// Package storedamage damages bbolt store files the way disks and crashes
// do, for the tests that prove a gateway refuses them and `herdbridge
// repair` salvages them. It reads the file's raw page layout (it must not
// import bbolt: only the store packages may).
package storedamage

import (
	"encoding/binary"
	"fmt"
	"os"
)

// Kinds are the damages Apply knows, in the order tests run them.
var Kinds = []string{"zero-length", "half-truncated", "flipped-bytes"}

// Apply damages the file at path: "zero-length" truncates it to nothing,
// "half-truncated" to half its size, "flipped-bytes" inverts the first
// element headers of the in-use leaf page holding the most elements (a
// data page: not a meta, free or root page).
func Apply(path, kind string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch kind {
	case "zero-length":
		return os.Truncate(path, 0)
	case "half-truncated":
		return os.Truncate(path, st.Size()/2)
	case "flipped-bytes":
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		off, err := busiestLeaf(b)
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

// busiestLeaf is the offset of the in-use leaf page with the most elements.
func busiestLeaf(b []byte) (int, error) {
	le := binary.LittleEndian
	if len(b) < 4096*2 {
		return 0, fmt.Errorf("storedamage: file too short")
	}
	ps := int(le.Uint32(b[16+8:]))
	// the meta page with the higher txid says where the freelist is
	m := 0
	if le.Uint64(b[ps+16+48:]) > le.Uint64(b[16+48:]) {
		m = ps
	}
	hwm := int(le.Uint64(b[m+16+40:]))
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
		if id == root || free[uint64(id)] || le.Uint64(p) != uint64(id) || le.Uint16(p[8:]) != 0x02 {
			continue
		}
		if n := int(le.Uint16(p[10:])); n > bestN {
			best, bestN = id, n
		}
		id += int(le.Uint32(p[12:])) // skip its overflow pages
	}
	if best < 0 {
		return 0, fmt.Errorf("storedamage: no leaf page in use")
	}
	return best * ps, nil
}
