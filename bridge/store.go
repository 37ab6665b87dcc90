package bridge

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Store is the gateway's own durable state (not the transport's): the local
// entity registry with token hashes, and the log of dead letters this
// gateway consumed. One bbolt file, state.db, in the state directory.
type Store struct {
	db     *bolt.DB
	path   string
	dlqMax int
}

var (
	bktEntities = []byte("entities") // gid -> storedEntity
	bktDead     = []byte("deadlog")  // seq -> DeadLetterRecord
	bktAwait    = []byte("awaiting") // msgId -> awaitRecord: briefs sent into panes, receipt not yet back
	bktTyping   = []byte("typing")   // msgId -> awaitRecord: briefs this gateway began typing, receipt not yet sent
)

// awaitRecord is a brief on the forward path whose INJECTED/FAILED has not
// come back. It outlives a gateway crash, so a brief lost between the
// worker gateway's ack and its inject is still reported FAILED.
type awaitRecord struct {
	MsgID    string    `json:"msgId"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	ToName   string    `json:"toName"`
	TraceID  string    `json:"traceId"`
	Excerpt  string    `json:"excerpt"` // the brief's start, so the FAILED says which brief
	Deadline time.Time `json:"deadline"`
}

type storedEntity struct {
	Entity
	Tokens []string `json:"tokens"` // sha256 hex of each issued token
}

// DeadLetterRecord is one line of `herdbridge dlq list`.
type DeadLetterRecord struct {
	At       time.Time `json:"at"`
	MsgID    string    `json:"msgId"`
	Kind     Kind      `json:"kind,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Reason   string    `json:"reason"`
	Queue    string    `json:"queue,omitempty"`
	Reported bool      `json:"reportedToSender"`
}

// OpenStore opens (creating) the state file. A corrupt or foreign file is an
// error that names it; nothing is rewritten.
func OpenStore(path string, dlqMax int) (*Store, error) {
	if dlqMax <= 0 {
		dlqMax = 10000
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("bridge: %s is locked by another process: is a gateway already running on this state dir?", path)
		}
		return nil, fmt.Errorf("bridge: cannot open state file %s (%w): if it is corrupt, move it aside to start fresh; nothing was deleted", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bktEntities, bktDead, bktAwait, bktTyping} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bridge: state file %s is unusable (%w): move it aside to start fresh; nothing was deleted", path, err)
	}
	return &Store{db: db, path: path, dlqMax: dlqMax}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) loadEntities() ([]storedEntity, error) {
	var out []storedEntity
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktEntities).ForEach(func(k, v []byte) error {
			var e storedEntity
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("entity %s in %s: %w", k, s.path, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

func (s *Store) putEntity(e storedEntity) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktEntities).Put([]byte(e.GID), raw) })
}

func (s *Store) putAwait(r awaitRecord) error { return s.putRecord(bktAwait, r) }

func (s *Store) deleteAwait(msgID string) error { return s.deleteRecord(bktAwait, msgID) }

func (s *Store) loadAwaits() ([]awaitRecord, error) { return s.loadRecords(bktAwait) }

func (s *Store) putTyping(r awaitRecord) error { return s.putRecord(bktTyping, r) }

func (s *Store) deleteTyping(msgID string) error { return s.deleteRecord(bktTyping, msgID) }

func (s *Store) loadTyping() ([]awaitRecord, error) { return s.loadRecords(bktTyping) }

func (s *Store) putRecord(b []byte, r awaitRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(b).Put([]byte(r.MsgID), raw) })
}

func (s *Store) deleteRecord(b []byte, msgID string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(b).Delete([]byte(msgID)) })
}

func (s *Store) loadRecords(b []byte) ([]awaitRecord, error) {
	var out []awaitRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b).ForEach(func(k, v []byte) error {
			var r awaitRecord
			if json.Unmarshal(v, &r) == nil {
				out = append(out, r)
			}
			return nil
		})
	})
	return out, err
}

func (s *Store) deleteEntity(gid string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktEntities).Delete([]byte(gid)) })
}

func (s *Store) appendDead(r DeadLetterRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktDead)
		seq, _ := b.NextSequence()
		if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), raw); err != nil {
			return err
		}
		for b.Stats().KeyN > s.dlqMax {
			k, _ := b.Cursor().First()
			if k == nil {
				break
			}
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeadLetters returns up to limit most recent dead-letter records, oldest first.
func (s *Store) DeadLetters(limit int) ([]DeadLetterRecord, error) {
	var out []DeadLetterRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktDead).Cursor()
		for k, v := c.Last(); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			var r DeadLetterRecord
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
