package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Time-ordered keys. The seen keys and the request records live for hours
// (until a message's expiry, 24 h for a request id), so a busy gateway
// keeps hundreds of thousands of them. Pruning them by scanning whole
// buckets every few minutes cost CPU and touched every page of the file
// (each scan faulted the buckets back into the gateway's RSS), and loading
// them all at start cost memory in proportion to a day's traffic. Keyed by
// time first, a prune reads only what it deletes and a start reads only
// the newest entries it keeps.

// bktSeenByExp holds the seen keys: expiry (8 bytes, Unix ms, big endian)
// then the key's digest (16 bytes); no value.
var bktSeenByExp = []byte("seen.exp")

// bktRequestsByTime indexes the request records by when they were
// published: At (8 bytes, Unix ns, big endian) then the record's key; no
// value.
var bktRequestsByTime = []byte("requests.at")

// SeenDigest is the 128-bit digest a seen key (gid+msgId) is kept as, in
// memory and in the file: a false "seen" would need a SHA-256 collision no
// sender can aim for.
type SeenDigest [16]byte

// DigestSeen digests a seen key.
func DigestSeen(key string) SeenDigest {
	sum := sha256.Sum256([]byte(key))
	return SeenDigest(sum[:16])
}

func timeKey(t uint64, rest []byte) []byte {
	k := make([]byte, 8, 8+len(rest))
	binary.BigEndian.PutUint64(k, t)
	return append(k, rest...)
}

func seenKey(s Seen) []byte {
	return timeKey(uint64(max(0, s.Exp.UnixMilli())), s.Digest[:])
}

func requestTimeKey(at time.Time, key []byte) []byte {
	return timeKey(uint64(max(0, at.UnixNano())), key)
}

// requestOfTimeKey is the request key an index entry points at (nil for
// an entry too short to be one of ours).
func requestOfTimeKey(k []byte) []byte {
	if len(k) <= 8 {
		return nil
	}
	return k[8:]
}

// keyTime is a time-ordered key's time part (0 for a key too short).
func keyTime(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

// anyOlder reports, in a read transaction, whether the time index bkt
// holds a key older than before: a prune with nothing to delete is not
// worth a write transaction.
func (s *Store) anyOlder(bkt []byte, before uint64) bool {
	older := false
	_ = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bkt); b != nil {
			k, _ := b.Cursor().First()
			older = k != nil && keyTime(k) < before
		}
		return nil
	})
	return older
}

// takeOlder deletes and returns the keys of b older than before (their
// time part), reading nothing past them. Keys are collected first: a
// cursor's Next after its Delete can skip a key.
func takeOlder(b *bolt.Bucket, before uint64) ([][]byte, error) {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && keyTime(k) < before; k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	return keys, deleteKeys(b, keys)
}

// migrateTimeIndexes moves a state file written before the time-ordered
// keys to them, once: the seen keys into bktSeenByExp (the old bucket is
// dropped) and an index entry for every request record. Runs in Open's
// transaction.
func migrateTimeIndexes(tx *bolt.Tx, now time.Time) error {
	if err := migrateSeen(tx, now); err != nil {
		return err
	}
	return indexRequests(tx)
}

func migrateSeen(tx *bolt.Tx, now time.Time) error {
	old := tx.Bucket(bktSeen)
	if old == nil {
		return nil
	}
	nb, err := tx.CreateBucketIfNotExists(bktSeenByExp)
	if err != nil {
		return err
	}
	err = old.ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return nil
		}
		s := Seen{Digest: DigestSeen(string(k)), Exp: time.UnixMilli(int64(binary.BigEndian.Uint64(v)))}
		if !s.Exp.After(now) {
			return nil
		}
		return nb.Put(seenKey(s), nil)
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bktSeen)
}

func indexRequests(tx *bolt.Tx) error {
	if tx.Bucket(bktRequestsByTime) != nil {
		return nil
	}
	idx, err := tx.CreateBucket(bktRequestsByTime)
	if err != nil {
		return err
	}
	b := tx.Bucket(bktRequests)
	if b == nil {
		return nil
	}
	var bad [][]byte // not records of ours: nothing could prune them
	err = b.ForEach(func(k, v []byte) error {
		var r Request
		if json.Unmarshal(v, &r) != nil {
			bad = append(bad, append([]byte(nil), k...))
			return nil
		}
		return idx.Put(requestTimeKey(r.At, k), nil)
	})
	if err != nil {
		return err
	}
	return deleteKeys(b, bad)
}
