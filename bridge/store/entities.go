package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Entity is a local entity as the registry persists it: what it is, and the
// SHA-256 hashes of the bearer tokens issued to it (never a token).
type Entity struct {
	GID        string    `json:"gid"`
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	Role       string    `json:"role"`
	Groups     []string  `json:"groups,omitempty"`
	PaneID     string    `json:"paneId,omitempty"`
	Registered time.Time `json:"registered"`
	Tokens     []string  `json:"tokens"`
	Spawned    bool      `json:"spawned,omitempty"`
	// LastSeen is the entity's last activity as last saved (reaping, in
	// the core); zero in records written before it existed.
	LastSeen time.Time `json:"lastSeen"`
	// Profile is a spawned worker's spawn profile (the spawn limits count
	// it); History, whether its messages are kept in its history.
	Profile string `json:"profile,omitempty"`
	History bool   `json:"history,omitempty"`
	// RemovingCause and Removing are set while the entity is being
	// removed (stopped, reaped, removed, its pane closed): what ended it
	// and the sentence its counterparts read. A start that finds them
	// finishes the removal instead of bringing the entity back.
	RemovingCause string `json:"removingCause,omitempty"`
	Removing      string `json:"removing,omitempty"`
}

// LoadEntities reads the registry.
func (s *Store) LoadEntities() ([]Entity, error) {
	var out []Entity
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bktEntities).ForEach(func(k, v []byte) error {
			var e Entity
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("entity %s in %s: %w", k, s.path, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// PutEntity writes (replaces) one entity.
func (s *Store) PutEntity(e Entity) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.dbUpdate(func(tx *bolt.Tx) error { return tx.Bucket(bktEntities).Put([]byte(e.GID), raw) })
}

// DeleteEntity forgets one entity.
func (s *Store) DeleteEntity(gid string) error {
	return s.dbUpdate(func(tx *bolt.Tx) error { return tx.Bucket(bktEntities).Delete([]byte(gid)) })
}

// ErrNoEntity is RevokeTokens finding no entity of that name.
var ErrNoEntity = errors.New("store: no entity of that name")

// RevokeTokens forgets every token hash of the entity named name in the
// state file at path, for when no gateway holds the file. It returns the
// entity as it was (with its tokens). A missing file or name wraps
// ErrNoEntity (or os.ErrNotExist for the file).
func RevokeTokens(path, name string) (Entity, error) {
	name = strings.TrimSpace(name)
	if _, err := os.Stat(path); err != nil {
		return Entity{}, err
	}
	s, err := Open(path, 0)
	if err != nil {
		return Entity{}, err
	}
	defer s.Close()
	var found *Entity
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktEntities)
		var key []byte
		err := b.ForEach(func(k, v []byte) error {
			var cur Entity
			if err := json.Unmarshal(v, &cur); err != nil {
				return fmt.Errorf("entity %s in %s: %w", k, path, err)
			}
			if cur.Name == name {
				key, found = append([]byte(nil), k...), &cur
			}
			return nil
		})
		if err != nil || found == nil {
			return err
		}
		cleared := *found
		cleared.Tokens = nil
		raw, err := json.Marshal(cleared)
		if err != nil {
			return err
		}
		return b.Put(key, raw)
	})
	if err != nil {
		return Entity{}, fmt.Errorf("bridge: revoke tokens in %s: %w", path, err)
	}
	if found == nil {
		return Entity{}, ErrNoEntity
	}
	return *found, nil
}
