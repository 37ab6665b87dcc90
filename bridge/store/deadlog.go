package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DeadLetter is one line of `herdbridge dlq list`.
type DeadLetter struct {
	At       time.Time `json:"at"`
	MsgID    string    `json:"msgId"`
	TraceID  string    `json:"traceId,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Reason   string    `json:"reason"`
	Queue    string    `json:"queue,omitempty"`
	Reported bool      `json:"reportedToSender"`
	// ForwardedTo is the sender's host, told by a DEAD_LETTER notice: it
	// reports the message (and logs it) itself.
	ForwardedTo string `json:"forwardedTo,omitempty"`
	// ConsumedBy is the host whose gateway consumed it and forwarded it
	// here (empty: consumed here).
	ConsumedBy string `json:"consumedBy,omitempty"`
}

// AppendDead adds a record, dropping the oldest past the log's bound.
func (s *Store) AppendDead(r DeadLetter) error { return s.AppendDeads([]DeadLetter{r}) }

// AppendDeads adds records in one transaction (one fsync for a removal's
// whole backlog), dropping the oldest past the log's bound.
func (s *Store) AppendDeads(rs []DeadLetter) error {
	if len(rs) == 0 {
		return nil
	}
	raws := make([][]byte, len(rs))
	for i, r := range rs {
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		raws[i] = raw
	}
	return s.dbUpdate(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktDead)
		var seq uint64
		for _, raw := range raws {
			seq, _ = b.NextSequence()
			if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), raw); err != nil {
				return err
			}
		}
		// keys are sequence numbers: keep the dlqMax newest. (Bucket.Stats
		// does not count this transaction's own puts, so a loop on KeyN
		// emptied the whole log once it first overflowed.)
		if seq <= uint64(s.dlqMax) {
			return nil
		}
		oldest := binary.BigEndian.AppendUint64(nil, seq-uint64(s.dlqMax)+1)
		var drop [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, oldest) < 0; k, _ = c.Next() {
			drop = append(drop, append([]byte(nil), k...))
		}
		return deleteKeys(b, drop)
	})
}

// DeadLetters returns up to limit most recent dead-letter records, oldest first.
func (s *Store) DeadLetters(limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktDead).Cursor()
		for k, v := c.Last(); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			var r DeadLetter
			if err := json.Unmarshal(v, &r); err != nil {
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}
