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
	// Publishing marks the record written before its message went out:
	// whether the publish completed is not known (the process may have died
	// in between, or the record saying it did could not be written). A
	// repeat then publishes again with the same MsgID, TraceID and TurnID,
	// which receivers drop as already seen if the first one arrived.
	Publishing bool `json:"publishing,omitempty"`
}

func requestKey(gid, id string) []byte { return []byte(gid + "\x00" + id) }

// PutRequest records (or updates) an idempotent call.
func (s *Store) PutRequest(r Request) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.dbUpdate(func(tx *bolt.Tx) error { return putRequestTx(tx, raw) })
}

// putRequestTx writes a record and its time-index entry. An update that
// moved At leaves its older index entry behind; the prune that reaches it
// finds the record newer and only drops the entry.
func putRequestTx(tx *bolt.Tx, raw []byte) error {
	var r Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil // not a record of ours: nothing to restore
	}
	b, err := tx.CreateBucketIfNotExists(bktRequests)
	if err != nil {
		return err
	}
	idx, err := tx.CreateBucketIfNotExists(bktRequestsByTime)
	if err != nil {
		return err
	}
	key := requestKey(r.GID, r.ID)
	if err := idx.Put(requestTimeKey(r.At, key), nil); err != nil {
		return err
	}
	return b.Put(key, raw)
}

// LoadRequests reads the newest calls published at or after since, at most
// limit of them, those journaled and not yet committed included (their
// newest version). Only what it returns is read, from the time index.
func (s *Store) LoadRequests(since time.Time, limit int) ([]Request, error) {
	pending := s.pendingRequests()
	var out []Request
	took := map[string]bool{}
	take := func(key string, raw []byte) {
		var r Request
		if !took[key] && json.Unmarshal(raw, &r) == nil && !r.At.Before(since) {
			took[key] = true
			out = append(out, r)
		}
	}
	for k, raw := range pending {
		take(k, raw)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b, idx := tx.Bucket(bktRequests), tx.Bucket(bktRequestsByTime)
		if b == nil || idx == nil {
			return nil
		}
		floor := uint64(max(0, since.UnixNano()))
		c := idx.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit && keyTime(k) >= floor; k, _ = c.Prev() {
			if key := requestOfTimeKey(k); key != nil && pending[string(key)] == nil {
				take(string(key), b.Get(key))
			}
		}
		return nil
	})
	return out, err
}

// PruneRequests forgets the calls published before before, reading only
// the index entries older than that and their records.
func (s *Store) PruneRequests(before time.Time) error {
	if !s.anyOlder(bktRequestsByTime, uint64(max(0, before.UnixNano()))) {
		return nil // the sweep's every second: no commit (two fdatasyncs) for nothing
	}
	return s.update(func(tx *bolt.Tx) error {
		b, idx := tx.Bucket(bktRequests), tx.Bucket(bktRequestsByTime)
		if b == nil || idx == nil {
			return nil
		}
		old, err := takeOlder(idx, uint64(max(0, before.UnixNano())))
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := pruneRequest(b, requestOfTimeKey(k), before); err != nil {
				return err
			}
		}
		return nil
	})
}

// pruneRequest deletes the record under key unless an update made it newer
// than before (it has its own, newer index entry).
func pruneRequest(b *bolt.Bucket, key []byte, before time.Time) error {
	if key == nil {
		return nil
	}
	v := b.Get(key)
	if v == nil {
		return nil
	}
	var r Request
	if json.Unmarshal(v, &r) == nil && !r.At.Before(before) {
		return nil
	}
	return b.Delete(key)
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
