package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Await is a brief on the forward path whose INJECTED/FAILED has not come
// back (or, in the typing bucket, one this gateway began typing whose
// receipt it has not sent). It outlives a gateway crash, so a brief lost
// between the worker gateway's ack and its inject is still reported.
type Await struct {
	MsgID    string    `json:"msgId"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	ToName   string    `json:"toName"`
	TraceID  string    `json:"traceId"`
	Excerpt  string    `json:"excerpt"` // the brief's start, so the FAILED says which brief
	Deadline time.Time `json:"deadline"`
	// ExpiresAt is the brief's: a brief queued at its worker's pane waits
	// until then, so its deadline moves there (zero in older records).
	ExpiresAt time.Time `json:"expiresAt"`
	// ToHost is the worker's host: its gateway decides whether an overdue
	// brief is given up (bridge/giveup.go); "" in older records.
	ToHost string `json:"toHost,omitempty"`
	// Asks counts the GIVE_UPs sent for it: each waits twice as long.
	Asks int `json:"asks,omitempty"`
}

// PutAwait records a brief awaiting its receipt.
func (s *Store) PutAwait(r Await) error { return s.putAwait(bktAwait, r) }

// DeleteAwait forgets a brief whose receipt came.
func (s *Store) DeleteAwait(msgID string) error { return s.deleteKey(bktAwait, msgID) }

// LoadAwaits reads every brief awaiting its receipt.
func (s *Store) LoadAwaits() ([]Await, error) { return s.loadAwaits(bktAwait) }

// PutTyping records a brief this gateway starts typing into a pane.
func (s *Store) PutTyping(r Await) error { return s.putAwait(bktTyping, r) }

// DeleteTyping forgets a typed brief whose receipt went out.
func (s *Store) DeleteTyping(msgID string) error { return s.deleteKey(bktTyping, msgID) }

// LoadTyping reads the briefs being typed when the gateway stopped.
func (s *Store) LoadTyping() ([]Await, error) { return s.loadAwaits(bktTyping) }

func (s *Store) putAwait(b []byte, r Await) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(b).Put([]byte(r.MsgID), raw) })
}

func (s *Store) deleteKey(b []byte, key string) error {
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(b).Delete([]byte(key)) })
}

func (s *Store) loadAwaits(b []byte) ([]Await, error) {
	var out []Await
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(k, v []byte) error {
			var r Await
			if json.Unmarshal(v, &r) == nil {
				out = append(out, r)
			}
			return nil
		})
	})
	return out, err
}
