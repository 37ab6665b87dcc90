package embedded

import (
	"github.com/herdbridge/herdbridge/bridge/store"
)

// The pending index: the journaled publishes (pubjournal.go) that no
// commit has carried into the store yet, which deliveries, depths and
// caps must see as stored. Its one owner is Transport, under t.pmu.
//
// A message is deliverable once durable (its fdatasync returned, or a
// commit carried it); a delivery stops at the first one that is not, so a
// consumer's cursor never passes a sequence that may still come. A
// publish the journal refused (full, or failing) is listed all the same,
// unjournaled (seg -1): the next commit carries it, and until then it is
// not durable.

// pubRec is one journaled publish: one record, one or more inboxes.
type pubRec struct {
	raw     []byte // the inbox record (JSON)
	at      int64  // enqueue time, Unix ms (TTL)
	targets []pubTarget
	seg     int    // the journal segment holding it; -1: unjournaled
	lsn     uint64 // its place in the journal's order (pubsync.go)
	durable bool
	taken   bool // in the batch of a commit under way
	applied bool // a commit carried it into the store
}

// pendEntry is one inbox's copy.
type pendEntry struct {
	seq uint64
	rec *pubRec
}

type pendingPubs struct {
	recs  []*pubRec              // journaled, not committed, in journal order
	byGID map[string][]pendEntry // per inbox, in sequence order
	next  map[string]uint64      // last sequence given out, per declared inbox
	bytes int                    // of recs' records

	segs      [2]*store.Journal
	active    int    // the segment appends go to
	unapplied [2]int // records of each segment no commit carried yet
	dirty     [2]bool
	lsn       uint64 // of the last append

	// epoch counts the commits that carried journal work; the store holds
	// the same count (keyEpoch), so a reader that sees the store one
	// ahead knows the commit in flight has landed and its batch, still
	// listed here, is counted twice (storedLocked).
	epoch    uint64
	inflight *journalBatch
}

func newPendingPubs() pendingPubs {
	return pendingPubs{byGID: map[string][]pendEntry{}, next: map[string]uint64{}}
}

// add lists r's copies (t.pmu held).
func (p *pendingPubs) add(r *pubRec) {
	for _, tg := range r.targets {
		p.byGID[tg.gid] = append(p.byGID[tg.gid], pendEntry{seq: tg.seq, rec: r})
	}
	p.recs = append(p.recs, r)
	p.bytes += len(r.raw)
}

// withdraw takes back an unjournaled record no commit could carry (t.pmu
// held): its publish fails, and its sequences stay unused.
func (p *pendingPubs) withdraw(r *pubRec) {
	for i, x := range p.recs {
		if x == r {
			p.recs = append(p.recs[:i:i], p.recs[i+1:]...)
			break
		}
	}
	for _, tg := range r.targets {
		p.removeEntry(tg.gid, tg.seq, r)
	}
	p.bytes -= len(r.raw)
}

// removeEntry deletes gid's entry seq if it belongs to rec.
func (p *pendingPubs) removeEntry(gid string, seq uint64, rec *pubRec) {
	es := p.byGID[gid]
	for i, e := range es {
		if e.seq == seq && e.rec == rec {
			es = append(es[:i:i], es[i+1:]...)
			break
		}
	}
	if len(es) == 0 {
		delete(p.byGID, gid)
		return
	}
	p.byGID[gid] = es
}

// dropApplied takes the copies of recs, which a commit carried (applied),
// out of the index (t.pmu held): one pass over each inbox they went to.
// Removing them one by one (removeEntry) scanned and copied an inbox's
// whole list per copy, quadratic in a second's messages to one inbox,
// under the lock every publish and delivery takes. The entries kept (those
// published since the batch was taken) move to a slice of their own, so
// the list a burst grew does not stay behind them.
func (p *pendingPubs) dropApplied(recs []*pubRec) {
	touched := map[string]bool{}
	for _, r := range recs {
		for _, tg := range r.targets {
			touched[tg.gid] = true
		}
	}
	for gid := range touched {
		var kept []pendEntry
		for _, e := range p.byGID[gid] {
			if !e.rec.applied {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(p.byGID, gid)
			continue
		}
		p.byGID[gid] = kept
	}
}

// from returns up to n of gid's deliverable messages after sequence
// after, and the sequence delivery must stay below: the first one not yet
// durable (0: none).
func (p *pendingPubs) from(gid string, after uint64, n int) (items []rawItem, barrier uint64) {
	for _, e := range p.byGID[gid] {
		if e.seq <= after {
			continue
		}
		if !e.rec.durable {
			return items, e.seq
		}
		if len(items) == n {
			return items, e.seq
		}
		items = append(items, rawItem{seq: e.seq, raw: e.rec.raw})
	}
	return items, 0
}

// head is the enqueue time of gid's first pending message after sequence
// after (ok false: none).
func (p *pendingPubs) head(gid string, after uint64) (at int64, ok bool) {
	for _, e := range p.byGID[gid] {
		if e.seq > after {
			return e.rec.at, true
		}
	}
	return 0, false
}

// count is how many of gid's copies are pending.
func (p *pendingPubs) count(gid string) int { return len(p.byGID[gid]) }

// pendingPublishes is how many journaled publishes no commit carried yet
// (tests, metrics).
func (t *Transport) pendingPublishes() int {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	n := len(t.pend.recs)
	if b := t.pend.inflight; b != nil {
		n += len(b.recs)
	}
	return n
}
