package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bktPaneQueue holds the forward path's per-pane queues: pane, 0x00, then
// the sequence (8 bytes, big-endian) -> QueuedBrief, so a cursor walks one
// pane's briefs in the order they arrived. Created on first use.
var bktPaneQueue = []byte("panequeue")

// bktPaneNext is the "next" lane of the same queues, keyed alike: briefs
// sent with priority next, typed before any brief of bktPaneQueue that
// typing has not begun on (QueueHead). A lane of its own, so a brief
// jumps the queue without any existing record being rewritten or
// renumbered: the pane's runner stays the one writer of its records.
var bktPaneNext = []byte("panenext")

// laneOf is the bucket of a queue record.
func laneOf(next bool) []byte {
	if next {
		return bktPaneNext
	}
	return bktPaneQueue
}

// QueuedBrief is a brief (or broadcast) this gateway took from a pane
// worker's inbox — acked there, so this record is its only copy — waiting
// to be typed into the pane.
type QueuedBrief struct {
	Pane string `json:"pane"`
	Seq  uint64 `json:"seq"` // order in the pane's queue, set by PutQueued
	To   string `json:"to"`  // the worker's gid
	Env  []byte `json:"env"` // the envelope, encoded by the core
	// Told is what the sender was last told the brief waits on ("" none).
	Told string `json:"told,omitempty"`
	// Typed: typing began. Such a brief is never typed again; while it
	// heads its queue its text may still sit in the composer.
	Typed bool `json:"typed,omitempty"`
	// Next: the brief is in the "next" lane (bktPaneNext).
	Next bool `json:"next,omitempty"`
	// Enters counts the Enter presses own-draft recovery spent on a typed
	// brief whose text sat in the composer, and EnterAt is when the last
	// one (or the typing) was: the retries are bounded and spaced across
	// restarts too.
	Enters  int       `json:"enters,omitempty"`
	EnterAt time.Time `json:"enterAt,omitzero"`
}

func queueKey(pane string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(pane), 0), seq)
}

// ErrQueueFull is PutQueued refusing a brief: its pane's queue holds max.
var ErrQueueFull = errors.New("store: the pane's queue is full")

// PutQueued appends q to its pane's queue (q.Next: to the "next" lane),
// sets q.Seq and reports how many briefs are ahead of it: for the normal
// lane every brief queued, for the next lane the next lane's briefs and a
// brief whose typing began. When some are, q.Told is set to toldIfBehind
// in the same transaction: its sender is told at once, and the pane's
// runner, which reads the record after, does not tell it again. A pane
// already holding max briefs in both lanes (max > 0) refuses it:
// ErrQueueFull.
func (s *Store) PutQueued(q *QueuedBrief, toldIfBehind string, max int) (ahead int, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		ahead, err = putQueuedTx(tx, q, toldIfBehind, max)
		return err
	})
	return ahead, err
}

// putQueuedTx is PutQueued inside tx.
func putQueuedTx(tx *bolt.Tx, q *QueuedBrief, toldIfBehind string, max int) (ahead int, err error) {
	normal, err := tx.CreateBucketIfNotExists(bktPaneQueue)
	if err != nil {
		return 0, err
	}
	next, err := tx.CreateBucketIfNotExists(bktPaneNext)
	if err != nil {
		return 0, err
	}
	nn, nt := countPane(normal, q.Pane)
	nx, _ := countPane(next, q.Pane)
	if max > 0 && nn+nx >= max {
		return 0, ErrQueueFull
	}
	ahead = nn + nx
	if q.Next {
		ahead = nx + nt
	}
	if ahead > 0 {
		q.Told = toldIfBehind
	}
	b := laneOf(q.Next)
	if q.Seq, err = tx.Bucket(b).NextSequence(); err != nil {
		return 0, err
	}
	return ahead, putQueued(tx.Bucket(b), *q)
}

// countPane counts pane's records in one lane, and how many of them typing
// began on.
func countPane(b *bolt.Bucket, pane string) (n, typed int) {
	prefix := append([]byte(pane), 0)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		n++
		var q QueuedBrief
		if json.Unmarshal(v, &q) == nil && q.Typed {
			typed++
		}
	}
	return n, typed
}

// UpdateQueued rewrites q in place (what its sender was told).
func (s *Store) UpdateQueued(q QueuedBrief) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(laneOf(q.Next))
		if err != nil {
			return err
		}
		return putQueued(b, q)
	})
}

// MarkTyped records, in one transaction, that typing q begins and (when
// typing is not nil) the typing record a restart reports as uncertain: a
// crash from then on never types it again.
func (s *Store) MarkTyped(q QueuedBrief, typing *Await) error {
	q.Typed = true
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(laneOf(q.Next))
		if err != nil {
			return err
		}
		if err := putQueued(b, q); err != nil {
			return err
		}
		if typing == nil {
			return nil
		}
		raw, err := json.Marshal(typing)
		if err != nil {
			return err
		}
		return tx.Bucket(bktTyping).Put([]byte(typing.MsgID), raw)
	})
}

// DeleteQueued takes a brief out of its pane's queue.
func (s *Store) DeleteQueued(q QueuedBrief) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(laneOf(q.Next))
		if b == nil {
			return nil
		}
		return b.Delete(queueKey(q.Pane, q.Seq))
	})
}

// QueuedFor lists pane's queue: the next lane, then the rest, each in
// order.
func (s *Store) QueuedFor(pane string) ([]QueuedBrief, error) {
	var out []QueuedBrief
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, lane := range [][]byte{bktPaneNext, bktPaneQueue} {
			walkPane(tx.Bucket(lane), pane, func(q QueuedBrief) bool {
				out = append(out, q)
				return true
			})
		}
		return nil
	})
	return out, err
}

// walkPane calls f on pane's records of one lane (b may be nil) in order,
// until f returns false.
func walkPane(b *bolt.Bucket, pane string, f func(QueuedBrief) bool) {
	if b == nil {
		return
	}
	prefix := append([]byte(pane), 0)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var q QueuedBrief
		if json.Unmarshal(v, &q) == nil && !f(q) {
			return
		}
	}
}

// QueueHead returns the brief of pane's queue to settle first; ok is false
// when the queue is empty. A brief whose typing began comes first (its
// text may sit in the composer: nothing may be typed before it is
// settled), then the next lane, then the rest. It reads at most two
// records, whatever waits behind them.
func (s *Store) QueueHead(pane string) (q QueuedBrief, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		var normal, next QueuedBrief
		var hasNormal, hasNext bool
		walkPane(tx.Bucket(bktPaneQueue), pane, func(r QueuedBrief) bool { normal, hasNormal = r, true; return false })
		walkPane(tx.Bucket(bktPaneNext), pane, func(r QueuedBrief) bool { next, hasNext = r, true; return false })
		switch {
		case hasNormal && normal.Typed, hasNormal && !hasNext:
			q, ok = normal, true
		case hasNext:
			q, ok = next, true
		}
		return nil
	})
	return q, ok, err
}

// WalkQueued calls f on every queued brief of every pane, one record at a
// time (a sweep that needs only ids holds no queue in memory).
func (s *Store) WalkQueued(f func(QueuedBrief)) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for _, lane := range [][]byte{bktPaneNext, bktPaneQueue} {
			b := tx.Bucket(lane)
			if b == nil {
				continue
			}
			if err := b.ForEach(func(_, v []byte) error {
				var q QueuedBrief
				if json.Unmarshal(v, &q) == nil {
					f(q)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// QueuedPanes lists the panes with a non-empty queue, sorted.
func (s *Store) QueuedPanes() ([]string, error) {
	seen := map[string]bool{}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, lane := range [][]byte{bktPaneQueue, bktPaneNext} {
			b := tx.Bucket(lane)
			if b == nil {
				continue
			}
			if err := b.ForEach(func(k, _ []byte) error {
				if pane, _, ok := bytes.Cut(k, []byte{0}); ok {
					seen[string(pane)] = true
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, err
}

// QueuedCounts counts the briefs queued per pane (both lanes), in one
// read of the queue buckets (keys only): for the roster and metrics.
func (s *Store) QueuedCounts() (map[string]int, error) {
	out := map[string]int{}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, lane := range [][]byte{bktPaneQueue, bktPaneNext} {
			b := tx.Bucket(lane)
			if b == nil {
				continue
			}
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if pane, _, ok := bytes.Cut(k, []byte{0}); ok {
					out[string(pane)]++
				}
			}
		}
		return nil
	})
	return out, err
}

func putQueued(b *bolt.Bucket, q QueuedBrief) error {
	raw, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return b.Put(queueKey(q.Pane, q.Seq), raw)
}
