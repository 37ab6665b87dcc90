package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bktTurns = []byte("turns") // a|r + "/" + owner gid + "/" + turnId -> Turn

// Turn is an open ask of a local entity: one it asked (Asked) and waits on,
// or one it received and may answer. Turns live here until they are
// forgotten (a minute after they expire), never on the broker: a gateway
// restart must not end a conversation the transport cannot carry.
type Turn struct {
	Owner     string    `json:"owner"` // the local entity's gid
	Asked     bool      `json:"asked"` // true: the owner asked; false: the owner was asked
	TurnID    string    `json:"turnId"`
	MsgID     string    `json:"msgId"` // the ASK's
	Peer      string    `json:"peer"`  // asked: the target; received: the asker
	TraceID   string    `json:"traceId,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`

	// an ask the owner made: how it ended ("" while open), and the answer
	// it got, until the owner reads it
	Status string      `json:"status,omitempty"`
	Reason string      `json:"reason,omitempty"`
	Answer *TurnAnswer `json:"answer,omitempty"`

	// an ask the owner received
	Answered  bool `json:"answered,omitempty"`
	Abandoned bool `json:"abandoned,omitempty"`
	Late      bool `json:"late,omitempty"`
	Missed    bool `json:"missed,omitempty"` // answered NO_WAITER on arrival
}

// TurnAnswer is the ANSWER an asked turn took.
type TurnAnswer struct {
	MsgID   string    `json:"msgId"`
	From    string    `json:"from"`
	TraceID string    `json:"traceId,omitempty"`
	TS      time.Time `json:"ts"`
	Body    []byte    `json:"body"`
}

func turnKey(asked bool, owner, turnID string) []byte {
	side := "r/"
	if asked {
		side = "a/"
	}
	return []byte(side + owner + "/" + turnID)
}

// PutTurn records t, replacing what was recorded for it.
func (s *Store) PutTurn(t Turn) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktTurns)
		if err != nil {
			return err
		}
		return b.Put(turnKey(t.Asked, t.Owner, t.TurnID), raw)
	})
}

// DeleteTurn forgets a turn.
func (s *Store) DeleteTurn(asked bool, owner, turnID string) error {
	return s.update(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bktTurns); b != nil {
			return b.Delete(turnKey(asked, owner, turnID))
		}
		return nil
	})
}

// LoadTurns reads every recorded turn, and deletes those that keep
// returns false for (expired, or of an entity that is gone) and those that
// do not decode, in the same transaction.
func (s *Store) LoadTurns(keep func(Turn) bool) ([]Turn, error) {
	var out []Turn
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bktTurns)
		if err != nil {
			return err
		}
		var drop [][]byte
		err = b.ForEach(func(k, v []byte) error {
			var t Turn
			if json.Unmarshal(v, &t) != nil || !keep(t) {
				drop = append(drop, append([]byte(nil), k...))
				return nil
			}
			out = append(out, t)
			return nil
		})
		if err != nil {
			return err
		}
		return deleteKeys(b, drop)
	})
	return out, err
}
