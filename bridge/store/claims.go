package store

import (
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bktClaims decides, on a worker's gateway, who ends a brief for one of its
// panes: msgId -> Claim. A brief this gateway queued is claimed (its queue
// will settle it: typed, or FAILED); a brief whose sender's gateway gave up
// on it before it was queued is given up (it is never queued after). Both
// are written in one transaction that reads the other, so exactly one of
// them wins. Created on first use; pruned past Until.
var bktClaims = []byte("claims")

// Claim is the record of bktClaims.
type Claim struct {
	MsgID string `json:"-"`
	// Host is the brief's sender's host: only that host's gateway may give
	// up on it, and a record from another host does not bind the brief.
	Host    string    `json:"host"`
	GivenUp bool      `json:"givenUp,omitempty"`
	Until   time.Time `json:"until"` // the brief's expiresAt plus the skew allowance
}

// ErrGivenUp is ClaimAndQueue refusing a brief its sender's gateway gave
// up on (and whose sender was told FAILED).
var ErrGivenUp = errors.New("store: the brief's sender gave up on it")

// ClaimAndQueue queues q as PutQueued does, unless the brief c names was
// given up by its sender's host (ErrGivenUp); it records the claim in the
// same transaction.
func (s *Store) ClaimAndQueue(c Claim, q *QueuedBrief, toldIfBehind string, max int) (ahead int, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktClaims)
		if err != nil {
			return err
		}
		if old, ok := getClaim(b, c.MsgID); ok && old.GivenUp && old.Host == c.Host {
			return ErrGivenUp
		}
		c.GivenUp = false
		if err := putClaim(b, c); err != nil {
			return err
		}
		ahead, err = putQueuedTx(tx, q, toldIfBehind, max)
		return err
	})
	return ahead, err
}

// GiveUp records that c's brief is given up unless it was claimed (queued)
// here: claimed reports that it was, and then nothing is written. again
// reports a give-up recorded before (the sender asked once more).
func (s *Store) GiveUp(c Claim) (claimed, again bool, err error) {
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktClaims)
		if err != nil {
			return err
		}
		old, ok := getClaim(b, c.MsgID)
		switch {
		case ok && !old.GivenUp:
			claimed = true
			return nil
		case ok && old.Host == c.Host:
			again = true
			return nil
		}
		c.GivenUp = true
		return putClaim(b, c)
	})
	return claimed, again, err
}

// PruneClaims deletes the records past their Until: their brief can no
// longer arrive (it expired, with the skew allowance).
func (s *Store) PruneClaims(now time.Time) (n int, err error) {
	if !s.anyClaimPast(now) {
		return 0, nil // the sweep's every second: no commit (two fdatasyncs) for nothing
	}
	err = s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktClaims)
		if b == nil {
			return nil
		}
		var old [][]byte
		_ = b.ForEach(func(k, v []byte) error {
			var c Claim
			if json.Unmarshal(v, &c) != nil || now.After(c.Until) {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}

func getClaim(b *bolt.Bucket, msgID string) (Claim, bool) {
	v := b.Get([]byte(msgID))
	if v == nil {
		return Claim{}, false
	}
	var c Claim
	if json.Unmarshal(v, &c) != nil {
		return Claim{}, false
	}
	c.MsgID = msgID
	return c, true
}

func putClaim(b *bolt.Bucket, c Claim) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return b.Put([]byte(c.MsgID), raw)
}

// anyClaimPast reports, in a read transaction, whether a claim is past
// its time (or unreadable): what PruneClaims would delete.
func (s *Store) anyClaimPast(now time.Time) bool {
	past := false
	_ = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktClaims)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var c Claim
			if json.Unmarshal(v, &c) != nil || now.After(c.Until) {
				past = true
				return errStopScan
			}
			return nil
		})
	})
	return past
}

// errStopScan ends a ForEach early (not an error to report).
var errStopScan = errors.New("store: scan stopped")
