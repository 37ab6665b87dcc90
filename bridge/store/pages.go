package store

import (
	"encoding/binary"
	"fmt"
	"io"
)

const (
	flagBranch     = 0x01
	flagLeaf       = 0x02
	elemSize       = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketLeafFlag = 0x01
	bucketHdrSize  = 16 // root pgid, sequence u64
	maxTreeDepth   = 64
)

// walkPages follows the page tree from the root the way bbolt's cursors
// do, reading raw pages from r, and reports the first page bbolt could not
// read safely: a page number outside the pages in use, a page that does
// not say it is the page it should be, an element that points outside its
// page, a page reached twice (a cycle would recurse forever), a tree
// deeper than any bbolt builds. The file comes from disk and is not
// trusted: walkPages never panics and never reads past h.HighMark pages.
func walkPages(r io.ReaderAt, h Header) error {
	w := pageWalker{r: r, h: h, seen: map[uint64]bool{}}
	return w.tree(h.Root, 0, "the root bucket")
}

type pageWalker struct {
	r    io.ReaderAt
	h    Header
	seen map[uint64]bool
}

// page reads page id with its overflow pages.
func (w *pageWalker) page(id uint64, what string) ([]byte, error) {
	ps := uint64(w.h.PageSize)
	if id < 2 || id >= w.h.HighMark {
		return nil, fmt.Errorf("%s: page %d is outside the %d pages in use", what, id, w.h.HighMark)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.r.ReadAt(hdr, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("%s: page %d: %v", what, id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(hdr); got != id {
		return nil, fmt.Errorf("%s: page %d says it is page %d", what, id, got)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if overflow >= w.h.HighMark-id {
		return nil, fmt.Errorf("%s: page %d runs past the %d pages in use", what, id, w.h.HighMark)
	}
	for p := id; p <= id+overflow; p++ {
		if w.seen[p] {
			return nil, fmt.Errorf("%s: page %d is reached twice", what, p)
		}
		w.seen[p] = true
	}
	buf := make([]byte, (overflow+1)*ps)
	if _, err := w.r.ReadAt(buf, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("%s: page %d: %v", what, id, err)
	}
	return buf, nil
}

// tree walks the page tree rooted at id.
func (w *pageWalker) tree(id uint64, depth int, what string) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("%s: the page tree is deeper than bbolt builds", what)
	}
	buf, err := w.page(id, what)
	if err != nil {
		return err
	}
	return w.node(buf, id, depth, what)
}

// node checks one branch or leaf page (buf: the page, or an inline
// bucket's page) and walks what it points to.
func (w *pageWalker) node(buf []byte, id uint64, depth int, what string) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("%s: the page tree is deeper than bbolt builds", what)
	}
	if len(buf) < pageHeaderSize {
		return fmt.Errorf("%s: page %d is cut short", what, id)
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(buf[8:]), int(le.Uint16(buf[10:]))
	if flags == flagBranch && count == 0 {
		return fmt.Errorf("%s: branch page %d is empty", what, id)
	}
	if pageHeaderSize+count*elemSize > len(buf) {
		return fmt.Errorf("%s: page %d counts %d elements, more than it holds", what, id, count)
	}
	var prev []byte
	for i := 0; i < count; i++ {
		at := pageHeaderSize + i*elemSize
		e := buf[at : at+elemSize]
		var pos, ksize, vsize uint64
		var child uint64
		var eflags uint32
		switch flags {
		case flagBranch:
			pos, ksize, child = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
		case flagLeaf:
			eflags, pos, ksize, vsize = le.Uint32(e[0:]), uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		default:
			return fmt.Errorf("%s: page %d is neither a branch nor a leaf page (flags %#x)", what, id, flags)
		}
		start := uint64(at) + pos
		if start+ksize+vsize > uint64(len(buf)) || start+ksize+vsize < start {
			return fmt.Errorf("%s: page %d, element %d points outside the page", what, id, i)
		}
		key := buf[start : start+ksize]
		if prev != nil && string(key) <= string(prev) {
			return fmt.Errorf("%s: page %d: keys out of order at element %d", what, id, i)
		}
		prev = key
		switch {
		case flags == flagBranch:
			if err := w.tree(child, depth+1, what); err != nil {
				return err
			}
		case eflags&bucketLeafFlag != 0:
			v := buf[start+ksize : start+ksize+vsize]
			sub := fmt.Sprintf("bucket %q", key)
			if len(v) < bucketHdrSize {
				return fmt.Errorf("%s: page %d: bucket %q has a short header", what, id, key)
			}
			if root := le.Uint64(v); root != 0 {
				if err := w.tree(root, depth+1, sub); err != nil {
					return err
				}
			} else if err := w.node(v[bucketHdrSize:], id, depth+1, sub); err != nil { // inline bucket
				return err
			}
		}
	}
	return nil
}
