package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// The bbolt file layout this file reads without bbolt, so a damaged file is
// judged before bbolt maps it (bbolt trusts its file: a page number past the
// end of a truncated file faults the process, a bad page panics).
const (
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	metaSize       = 64 // magic, version, pageSize, flags u32; root u64, seq u64; freelist, pgid, txid, checksum u64
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	flagMeta       = 0x04
	flagFreelist   = 0x10
	noFreelist     = ^uint64(0)
	minPageSize    = 1024
	maxPageSize    = 1 << 20
)

// Header is what the meta page bbolt would use says about the file.
type Header struct {
	PageSize uint32
	Root     uint64 // root bucket's page
	Freelist uint64 // freelist page, or ^0 when the freelist is not stored
	HighMark uint64 // pages in use (the file must hold at least this many)
	TxID     uint64
	Meta     int // which meta page (0 or 1)
}

type meta struct {
	magic, version, pageSize, flags uint32
	root, seq, freelist, pgid, txid uint64
	checksum                        uint64
}

// parseMeta reads a meta page at b (page header included). It never panics.
func parseMeta(b []byte) (meta, error) {
	var m meta
	if len(b) < pageHeaderSize+metaSize {
		return m, fmt.Errorf("short meta page")
	}
	if flags := binary.LittleEndian.Uint16(b[8:10]); flags&flagMeta == 0 {
		return m, fmt.Errorf("not a meta page (flags %#x)", flags)
	}
	p := b[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	m = meta{
		magic: le.Uint32(p[0:]), version: le.Uint32(p[4:]), pageSize: le.Uint32(p[8:]), flags: le.Uint32(p[12:]),
		root: le.Uint64(p[16:]), seq: le.Uint64(p[24:]), freelist: le.Uint64(p[32:]), pgid: le.Uint64(p[40:]),
		txid: le.Uint64(p[48:]), checksum: le.Uint64(p[56:]),
	}
	if m.magic != boltMagic {
		return m, fmt.Errorf("not a bbolt file (bad magic)")
	}
	if m.version != boltVersion {
		return m, fmt.Errorf("bbolt format version %d, want %d", m.version, boltVersion)
	}
	h := fnv.New64a()
	h.Write(p[:56])
	if h.Sum64() != m.checksum {
		return m, fmt.Errorf("meta page checksum mismatch")
	}
	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return m, fmt.Errorf("implausible page size %d", m.pageSize)
	}
	return m, nil
}

// ParseHeader judges a bbolt file from its first bytes (head: at least the
// first two pages when the file is that long) and its size, as bbolt would
// open it: the valid meta page with the higher transaction id wins. It
// checks that the file is a whole number of pages, holds every page the
// meta page counts, and that the root and freelist pages are inside it.
// head comes from an untrusted file: ParseHeader never panics.
func ParseHeader(head []byte, size int64) (Header, error) {
	if size == 0 {
		return Header{}, fmt.Errorf("the file is empty (zero length)")
	}
	m, which, err := pickMeta(head)
	if err != nil {
		return Header{}, err
	}
	ps := int64(m.pageSize)
	if size%ps != 0 {
		return Header{}, fmt.Errorf("the file is %d bytes, not a whole number of %d-byte pages (truncated?)", size, ps)
	}
	if m.pgid < 2 || m.pgid > uint64(size/ps) {
		return Header{}, fmt.Errorf("the file has %d pages but its meta page counts %d (truncated?)", size/ps, m.pgid)
	}
	if m.root < 2 || m.root >= m.pgid {
		return Header{}, fmt.Errorf("root page %d is outside the %d pages in use", m.root, m.pgid)
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		return Header{}, fmt.Errorf("freelist page %d is outside the %d pages in use", m.freelist, m.pgid)
	}
	return Header{PageSize: m.pageSize, Root: m.root, Freelist: m.freelist, HighMark: m.pgid, TxID: m.txid, Meta: which}, nil
}

// pickMeta returns the meta page bbolt would use: the valid one with the
// higher transaction id.
func pickMeta(head []byte) (meta, int, error) {
	m0, err0 := parseMeta(head)
	var m1 meta
	err1 := fmt.Errorf("no second meta page")
	if err0 == nil {
		if int64(m0.pageSize)*2 <= int64(len(head)) {
			m1, err1 = parseMeta(head[m0.pageSize:])
		}
	} else {
		// meta 0 is unreadable: bbolt then looks for meta 1 at each
		// plausible page size
		for ps := int64(minPageSize); ps <= maxPageSize && ps*2 <= int64(len(head)); ps *= 2 {
			if m, err := parseMeta(head[ps:]); err == nil && int64(m.pageSize) == ps {
				m1, err1 = m, nil
				break
			}
		}
	}
	var m meta
	var which int
	switch {
	case err0 != nil && err1 != nil:
		return m, 0, fmt.Errorf("both meta pages are invalid (%v; %v)", err0, err1)
	case err0 != nil:
		m, which = m1, 1
	case err1 != nil:
		m, which = m0, 0
	case m1.txid > m0.txid:
		m, which = m1, 1
	default:
		m, which = m0, 0
	}
	if err0 == nil && err1 == nil && m0.pageSize != m1.pageSize {
		return m, 0, fmt.Errorf("the meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	}
	return m, which, nil
}

// checkFreelistPage judges the freelist page's header (b: its first bytes):
// bbolt reads it, and its overflow pages, without bounds checks.
func checkFreelistPage(b []byte, h Header) error {
	if h.Freelist == noFreelist {
		return nil
	}
	if len(b) < pageHeaderSize {
		return fmt.Errorf("freelist page %d is cut short", h.Freelist)
	}
	le := binary.LittleEndian
	if id := le.Uint64(b[0:]); id != h.Freelist {
		return fmt.Errorf("freelist page %d says it is page %d", h.Freelist, id)
	}
	if flags := le.Uint16(b[8:]); flags&flagFreelist == 0 {
		return fmt.Errorf("freelist page %d is not a freelist page (flags %#x)", h.Freelist, flags)
	}
	overflow := uint64(le.Uint32(b[12:]))
	if h.Freelist+overflow >= h.HighMark {
		return fmt.Errorf("freelist page %d runs past the %d pages in use", h.Freelist, h.HighMark)
	}
	count := uint64(le.Uint16(b[10:]))
	ids := count
	if count == 0xFFFF {
		if len(b) < pageHeaderSize+8 {
			return fmt.Errorf("freelist page %d is cut short", h.Freelist)
		}
		ids = le.Uint64(b[pageHeaderSize:]) + 1
	}
	if ids*8 > (overflow+1)*uint64(h.PageSize) {
		return fmt.Errorf("freelist page %d counts %d free pages, more than it can hold", h.Freelist, ids)
	}
	return nil
}
