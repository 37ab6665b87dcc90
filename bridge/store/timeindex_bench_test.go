package store

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkSeenPrune: the minute's prune of a seen-set bucket holding
// 200,000 keys (a busy gateway's hours), 100 of them expired — by the
// time-ordered keys against the whole-bucket scan it replaced (the
// baseline, measured in the same run: a ForEach decoding every expiry).
func BenchmarkSeenPrune(b *testing.B) {
	s, _ := openStore(b)
	now := time.UnixMilli(1_000_000_000)
	const n, expired = 200_000, 100
	batch := make([]Seen, 0, n)
	for i := range n {
		batch = append(batch, Seen{Digest: DigestSeen(fmt.Sprint("gid", i)), Exp: now.Add(time.Duration(i-expired) * time.Millisecond)})
	}
	if err := s.SaveMemory(batch, nil, false, now, now); err != nil {
		b.Fatal(err)
	}
	b.Run("by-expiry", func(b *testing.B) {
		for b.Loop() {
			_ = s.db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(bktSeenByExp).Cursor()
				for k, _ := c.First(); k != nil && keyTime(k) < uint64(now.UnixMilli()); k, _ = c.Next() {
				}
				return nil
			})
		}
	})
	b.Run("full-scan-baseline", func(b *testing.B) {
		for b.Loop() {
			_ = s.db.View(func(tx *bolt.Tx) error {
				return tx.Bucket(bktSeenByExp).ForEach(func(k, v []byte) error {
					_ = time.UnixMilli(int64(binary.BigEndian.Uint64(k))).Before(now)
					return nil
				})
			})
		}
	})
}
