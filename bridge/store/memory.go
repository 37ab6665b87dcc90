package store

import (
	"encoding/json"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Seen is a (gid, msgId) key verification took, by its digest, kept
// until Exp.
type Seen struct {
	Digest SeenDigest
	Exp    time.Time
}

// Sender binds a gid to the host whose signed presence named it first.
type Sender struct {
	GID  string    `json:"gid"`
	Host string    `json:"host"`
	Seen time.Time `json:"seen"` // last heartbeat (persisted at most hourly)
	// Role is the entity's role in that presence (absent in records of
	// older gateways): the role policy judges a backlog by it.
	Role string `json:"role,omitempty"`
}

// SaveMemory writes new seen keys and sender bindings in one transaction;
// with prune, seen keys past their expiry and senders silent since
// staleBefore are dropped too.
//
// It rides the state file's group commit: once a second, it would
// otherwise take bbolt's one write lock and an fsync of its own in the
// middle of the message paths' commits.
func (s *Store) SaveMemory(seen []Seen, senders []Sender, prune bool, now, staleBefore time.Time) error {
	return s.update(func(tx *bolt.Tx) error {
		sb, err := tx.CreateBucketIfNotExists(bktSeenByExp)
		if err != nil {
			return err
		}
		nb, err := tx.CreateBucketIfNotExists(bktSenders)
		if err != nil {
			return err
		}
		for _, r := range seen {
			if err := sb.Put(seenKey(r), nil); err != nil {
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

// pruneSeen drops the expired seen keys, reading only them.
func pruneSeen(b *bolt.Bucket, now time.Time) error {
	_, err := takeOlder(b, uint64(max(0, now.UnixMilli())))
	return err
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

// LoadMemory reads the newest unexpired seen keys, at most maxSeen, and the
// senders heard from since staleBefore. Only what it returns is read: a
// gateway that took a day of messages starts as fast as an idle one.
func (s *Store) LoadMemory(now, staleBefore time.Time, maxSeen int) (seen []Seen, senders []Sender, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bktSeenByExp); b != nil {
			seen = newestSeen(b, now, maxSeen)
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

// newestSeen walks the seen keys from the latest expiry back, oldest
// first in the result.
func newestSeen(b *bolt.Bucket, now time.Time, limit int) []Seen {
	var out []Seen
	c := b.Cursor()
	for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
		exp := time.UnixMilli(int64(keyTime(k)))
		if !exp.After(now) {
			break
		}
		if len(k) != 8+len(SeenDigest{}) {
			continue
		}
		out = append(out, Seen{Digest: SeenDigest(k[8:]), Exp: exp})
	}
	slices.Reverse(out)
	return out
}
