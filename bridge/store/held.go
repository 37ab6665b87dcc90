package store

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bktHeld holds the messages held for local entities, moved out of their
// transport inboxes (acked there, so a record here is the message's only
// copy until the entity drains it): gid, 0x00, then the sequence (8 bytes,
// big-endian) -> the envelope, encoded by the core. A cursor walks one
// entity's messages in the order they arrived. Created on first use.
var bktHeld = []byte("held")

func heldKey(gid string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(gid), 0), seq)
}

// HeldPut is one message to hold for GID.
type HeldPut struct {
	GID string
	Env []byte
}

// PutHeld writes puts in one transaction (one fsync for the batch) and
// returns the sequence each was stored under, in order.
func (s *Store) PutHeld(puts []HeldPut) ([]uint64, error) {
	seqs := make([]uint64, len(puts))
	err := s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktHeld)
		if err != nil {
			return err
		}
		for i, p := range puts {
			if seqs[i], err = b.NextSequence(); err != nil {
				return err
			}
			if err := b.Put(heldKey(p.GID, seqs[i]), p.Env); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// GetHeld reads gid's messages seqs; a record that is gone reads nil.
func (s *Store) GetHeld(gid string, seqs []uint64) ([][]byte, error) {
	out := make([][]byte, len(seqs))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktHeld)
		if b == nil {
			return nil
		}
		for i, seq := range seqs {
			if v := b.Get(heldKey(gid, seq)); v != nil {
				out[i] = bytes.Clone(v) // valid only inside the transaction
			}
		}
		return nil
	})
	return out, err
}

// DeleteHeld removes gid's messages seqs (drained or expired) in one
// transaction.
func (s *Store) DeleteHeld(gid string, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktHeld)
		if b == nil {
			return nil
		}
		for _, seq := range seqs {
			if err := b.Delete(heldKey(gid, seq)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DropHeld removes everything held for gid (the entity was removed).
func (s *Store) DropHeld(gid string) error {
	return s.dbUpdate(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktHeld)
		if b == nil {
			return nil
		}
		prefix := append([]byte(gid), 0)
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// EachHeld calls f for every held message, each entity's in arrival
// order. env is valid only during the call.
func (s *Store) EachHeld(f func(gid string, seq uint64, env []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktHeld)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			i := bytes.IndexByte(k, 0)
			if i < 0 || len(k) != i+9 {
				return nil // not a held key: skipped, never misread
			}
			return f(string(k[:i]), binary.BigEndian.Uint64(k[i+1:]), v)
		})
	})
}
