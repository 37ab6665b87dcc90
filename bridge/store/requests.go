package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bktRequests holds the idempotent calls remembered for 24 h, keyed by
// the calling entity's gid and the caller's request id. It is created on
// first use, so a state file written before it existed opens unchanged.
var bktRequests = []byte("requests")

// Request is one idempotent tool call that published a message: what a
// repeat of it (same entity, same request id) is answered with instead of
// publishing again.
type Request struct {
	GID     string    `json:"gid"` // the calling entity
	ID      string    `json:"id"`  // the caller's request_id
	Tool    string    `json:"tool"`
	Digest  string    `json:"digest"` // of the call's arguments: a repeat must match it
	Kind    string    `json:"kind"`   // of the message it published
	MsgID   string    `json:"msgId"`
	TraceID string    `json:"traceId,omitempty"`
	TurnID  string    `json:"turnId,omitempty"`
	To      string    `json:"to"`               // gid or broadcast key
	Target  string    `json:"target,omitempty"` // as the result shows it
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"` // when it was published; forgotten 24 h later
}

func requestKey(gid, id string) []byte { return []byte(gid + "\x00" + id) }

// PutRequest records (or updates) an idempotent call.
func (s *Store) PutRequest(r Request) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktRequests)
		if err != nil {
			return err
		}
		return b.Put(requestKey(r.GID, r.ID), raw)
	})
}

// LoadRequests reads the calls published at or after since, those
// journaled and not yet committed included (their newest version).
func (s *Store) LoadRequests(since time.Time) ([]Request, error) {
	pending := s.pendingRequests()
	var out []Request
	take := func(raw []byte) {
		var r Request
		if json.Unmarshal(raw, &r) == nil && !r.At.Before(since) {
			out = append(out, r)
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktRequests)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if _, newer := pending[string(k)]; !newer {
				take(v)
			}
			return nil
		})
	})
	for _, raw := range pending {
		take(raw)
	}
	return out, err
}

// PruneRequests forgets the calls published before before (and records
// that do not parse).
func (s *Store) PruneRequests(before time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktRequests)
		if b == nil {
			return nil
		}
		return deleteWhere(b, func(v []byte) bool {
			var r Request
			return json.Unmarshal(v, &r) != nil || r.At.Before(before)
		})
	})
}

// GetRequest reads the call of entity gid with request id id, a journaled
// one not yet committed included (its newest version); ok is false when
// none is recorded. The bridge asks for it when the call is no longer in
// its in-memory book (bounded by count).
func (s *Store) GetRequest(gid, id string) (r Request, ok bool, err error) {
	key := requestKey(gid, id)
	raw := s.pendingRequest(string(key))
	if raw == nil {
		err = s.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bktRequests); b != nil {
				if v := b.Get(key); v != nil {
					raw = append([]byte(nil), v...)
				}
			}
			return nil
		})
	}
	if err != nil || raw == nil {
		return Request{}, false, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Request{}, false, nil // not a record of ours: as if none
	}
	return r, true, nil
}
