package store

import (
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Seen is a (gid, msgId) key verification took, kept until Exp.
type Seen struct {
	Key string
	Exp time.Time
}

// Sender binds a gid to the host whose signed presence named it first.
type Sender struct {
	GID  string    `json:"gid"`
	Host string    `json:"host"`
	Seen time.Time `json:"seen"` // last heartbeat (persisted at most hourly)
}

// SaveMemory writes new seen keys and sender bindings in one transaction;
// with prune, seen keys past their expiry and senders silent since
// staleBefore are dropped too.
func (s *Store) SaveMemory(seen []Seen, senders []Sender, prune bool, now, staleBefore time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		sb, err := tx.CreateBucketIfNotExists(bktSeen)
		if err != nil {
			return err
		}
		nb, err := tx.CreateBucketIfNotExists(bktSenders)
		if err != nil {
			return err
		}
		for _, r := range seen {
			if err := sb.Put([]byte(r.Key), binary.BigEndian.AppendUint64(nil, uint64(r.Exp.UnixMilli()))); err != nil {
				return err
			}
		}
		for _, r := range senders {
			raw, _ := json.Marshal(r)
			if err := nb.Put([]byte(r.GID), raw); err != nil {
				return err
			}
		}
		if !prune {
			return nil
		}
		if err := pruneSeen(sb, now); err != nil {
			return err
		}
		return pruneSenders(nb, staleBefore)
	})
}

func pruneSeen(b *bolt.Bucket, now time.Time) error {
	return deleteWhere(b, func(v []byte) bool {
		return len(v) != 8 || time.UnixMilli(int64(binary.BigEndian.Uint64(v))).Before(now)
	})
}

func pruneSenders(b *bolt.Bucket, staleBefore time.Time) error {
	return deleteWhere(b, func(v []byte) bool {
		var r Sender
		return json.Unmarshal(v, &r) != nil || r.Seen.Before(staleBefore)
	})
}

// deleteWhere deletes the keys whose value drop accepts. Keys are
// collected first: a cursor's Next after its Delete can skip a key.
func deleteWhere(b *bolt.Bucket, drop func(v []byte) bool) error {
	var keys [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if drop(v) {
			keys = append(keys, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return deleteKeys(b, keys)
}

func deleteKeys(b *bolt.Bucket, keys [][]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// LoadMemory reads the unexpired seen keys and the senders heard from since
// staleBefore.
func (s *Store) LoadMemory(now, staleBefore time.Time) (seen []Seen, senders []Sender, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bktSeen); b != nil {
			if err := b.ForEach(func(k, v []byte) error {
				if len(v) == 8 {
					if exp := time.UnixMilli(int64(binary.BigEndian.Uint64(v))); exp.After(now) {
						seen = append(seen, Seen{Key: string(k), Exp: exp})
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if b := tx.Bucket(bktSenders); b != nil {
			return b.ForEach(func(k, v []byte) error {
				var r Sender
				if json.Unmarshal(v, &r) == nil && !r.Seen.Before(staleBefore) {
					senders = append(senders, r)
				}
				return nil
			})
		}
		return nil
	})
	return seen, senders, err
}
