package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// bktPaneQueue holds the forward path's per-pane queues: pane, 0x00, then
// the sequence (8 bytes, big-endian) -> QueuedBrief, so a cursor walks one
// pane's briefs in the order they arrived. Created on first use.
var bktPaneQueue = []byte("panequeue")

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
}

func queueKey(pane string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(pane), 0), seq)
}

// ErrQueueFull is PutQueued refusing a brief: its pane's queue holds max.
var ErrQueueFull = errors.New("store: the pane's queue is full")

// PutQueued appends q to its pane's queue, sets q.Seq and reports how
// many briefs are ahead of it. When some are, q.Told is set to
// toldIfBehind in the same transaction: its sender is told at once, and
// the pane's runner, which reads the record after, does not tell it again.
// A queue already holding max briefs (max > 0) refuses it: ErrQueueFull.
func (s *Store) PutQueued(q *QueuedBrief, toldIfBehind string, max int) (ahead int, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		ahead = 0 // a second run starts over
		b, err := tx.CreateBucketIfNotExists(bktPaneQueue)
		if err != nil {
			return err
		}
		prefix := append([]byte(q.Pane), 0)
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			ahead++
		}
		if max > 0 && ahead >= max {
			return ErrQueueFull
		}
		if ahead > 0 {
			q.Told = toldIfBehind
		}
		if q.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		return putQueued(b, *q)
	})
	return ahead, err
}

// UpdateQueued rewrites q in place (what its sender was told).
func (s *Store) UpdateQueued(q QueuedBrief) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktPaneQueue)
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
		b, err := tx.CreateBucketIfNotExists(bktPaneQueue)
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
func (s *Store) DeleteQueued(pane string, seq uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktPaneQueue)
		if b == nil {
			return nil
		}
		return b.Delete(queueKey(pane, seq))
	})
}

// QueuedFor lists pane's queue in order.
func (s *Store) QueuedFor(pane string) ([]QueuedBrief, error) {
	var out []QueuedBrief
	prefix := append([]byte(pane), 0)
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktPaneQueue)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var q QueuedBrief
			if json.Unmarshal(v, &q) == nil {
				out = append(out, q)
			}
		}
		return nil
	})
	return out, err
}

// QueueHead returns the first brief of pane's queue; ok is false when the
// queue is empty. It reads one record, whatever waits behind it.
func (s *Store) QueueHead(pane string) (q QueuedBrief, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktPaneQueue)
		if b == nil {
			return nil
		}
		prefix := append([]byte(pane), 0)
		k, v := b.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		ok = true
		return json.Unmarshal(v, &q)
	})
	return q, ok, err
}

// QueuedPanes lists the panes with a non-empty queue.
func (s *Store) QueuedPanes() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktPaneQueue)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			pane, _, ok := bytes.Cut(k, []byte{0})
			if ok && (len(out) == 0 || out[len(out)-1] != string(pane)) {
				out = append(out, string(pane))
			}
			return nil
		})
	})
	return out, err
}

// QueuedCounts counts the briefs queued per pane, in one read of the
// whole queue bucket (keys only): for the roster and metrics.
func (s *Store) QueuedCounts() (map[string]int, error) {
	out := map[string]int{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktPaneQueue)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if pane, _, ok := bytes.Cut(k, []byte{0}); ok {
				out[string(pane)]++
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
