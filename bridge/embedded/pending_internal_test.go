package embedded

import (
	"fmt"
	"testing"
)

// pendWith lists n records for gid (and every third one for a second
// inbox too, as a broadcast would), in journal order.
func pendWith(n int) (*pendingPubs, []*pubRec) {
	p := newPendingPubs()
	var recs []*pubRec
	for i := range n {
		r := &pubRec{raw: []byte("x"), targets: []pubTarget{{gid: "a", seq: uint64(i + 1)}}}
		if i%3 == 0 {
			r.targets = append(r.targets, pubTarget{gid: "b", seq: uint64(i/3 + 1)})
		}
		p.add(r)
		recs = append(recs, r)
	}
	return &p, recs
}

// TestDropAppliedKeepsTheRest: a commit's records leave every inbox's
// list; the copies published since stay, in sequence order, and an inbox
// left with none leaves the index.
func TestDropAppliedKeepsTheRest(t *testing.T) {
	p, recs := pendWith(10)
	batch := recs[:7]
	for _, r := range batch {
		r.applied = true
	}
	p.dropApplied(batch)
	var seqs []uint64
	for _, e := range p.byGID["a"] {
		if e.rec.applied {
			t.Fatalf("applied copy %d still listed", e.seq)
		}
		seqs = append(seqs, e.seq)
	}
	if fmt.Sprint(seqs) != "[8 9 10]" {
		t.Fatalf("inbox a keeps %v, want [8 9 10]", seqs)
	}
	if es := p.byGID["b"]; len(es) != 1 || es[0].seq != 4 {
		t.Fatalf("inbox b keeps %+v, want only seq 4", es)
	}
	for _, r := range recs[7:] {
		r.applied = true
	}
	p.dropApplied(recs[7:])
	if len(p.byGID) != 0 {
		t.Fatalf("emptied inboxes still in the index: %v", p.byGID)
	}
}

// BenchmarkDropApplied is a commit carrying a second's sends to one inbox
// out of the index; per record it stays flat as the batch grows.
func BenchmarkDropApplied(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				p, recs := pendWith(n)
				for _, r := range recs {
					r.applied = true
				}
				b.StartTimer()
				p.dropApplied(recs)
			}
		})
	}
}
