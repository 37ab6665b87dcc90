package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Store is one open state file.
type Store struct {
	db     *bolt.DB
	path   string
	dlqMax int
	lazy   *lazyPuts    // lazyrequests.go
	writer *GroupWriter // the writes on message paths, committed together (update)

	diskFull atomic.Bool // the simulated full disk (diskfull.go)
}

var (
	bktEntities = []byte("entities") // gid -> Entity
	bktDead     = []byte("deadlog")  // seq -> DeadLetter
	bktAwait    = []byte("awaiting") // msgId -> Await: briefs sent into panes, receipt not yet back
	bktTyping   = []byte("typing")   // msgId -> Await: briefs this gateway began typing, receipt not yet sent
	bktSeen     = []byte("seen")     // before bktSeenByExp: seen key -> expiry, Unix ms (8 bytes)
	bktSenders  = []byte("senders")  // gid -> Sender
)

// Open opens (creating) the state file. A corrupt or foreign file is an
// error that names it; nothing is rewritten. dlqMax bounds the dead-letter
// log (default 10000).
func Open(path string, dlqMax int) (*Store, error) {
	if dlqMax <= 0 {
		dlqMax = 10000
	}
	if err := refuseZeroLength(path); err != nil {
		return nil, err
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
		return migrateTimeIndexes(tx, time.Now())
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bridge: state file %s is unusable (%w): move it aside to start fresh; nothing was deleted", path, err)
	}
	s := &Store{db: db, path: path, dlqMax: dlqMax}
	if err := s.openLazy(); err != nil {
		db.Close()
		return nil, err
	}
	s.writer = NewGroupWriter(db, s.lazyWork, lazyCommitDelay)
	return s, nil
}

// Check judges the state file at path before Open (see CheckFile): a
// damaged file is a *DamageError naming it and the repair command, never a
// panic. Entities reports how many entities a healthy file registers.
func Check(path string) (fi FileInfo, entities int, err error) {
	fi, err = CheckFile(path)
	return fi, fi.Keys[string(bktEntities)], err
}

// refuseZeroLength: bbolt would silently initialise a zero-length file as
// a new, empty store; an existing zero-length store file is a truncated
// one (bbolt writes four pages when it creates a file).
func refuseZeroLength(path string) error {
	if st, err := os.Stat(path); err == nil && st.Size() == 0 {
		return &DamageError{Path: path, Reason: "the file is empty (zero length)"}
	}
	return nil
}

// RefuseZeroLength is refuseZeroLength for the embedded transport's file.
func RefuseZeroLength(path string) error { return refuseZeroLength(path) }

// Path is the state file's path, for error messages.
func (s *Store) Path() string { return s.path }

// Close closes the file.
func (s *Store) Close() error {
	s.writer.Stop()
	err := s.closeLazy() // what the writer's last commits did not carry
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Repair repairs the state file at path if CheckFile finds it damaged (see
// RepairFile), dropping entities whose record no longer decodes. Held
// messages are kept as read: the core drops any it cannot decode when it
// loads them, with a warning.
func Repair(path string, now time.Time) (RepairResult, error) {
	return RepairFile(path, now, func(tx *bolt.Tx, r *RepairResult) error {
		for _, b := range [][]byte{bktEntities, bktDead, bktAwait, bktTyping} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		b := tx.Bucket(bktEntities)
		var bad [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var e Entity
			if json.Unmarshal(v, &e) != nil || e.GID != string(k) {
				bad = append(bad, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range bad {
			if err := b.Delete(k); err != nil {
				return err
			}
			r.Kept[string(bktEntities)]--
			r.Lost = append(r.Lost, fmt.Sprintf("entity %q: its record does not decode", k))
		}
		return nil
	})
}

// EntityGIDs lists the gids registered in the state file at path (for the
// repair report).
func EntityGIDs(path string) ([]string, error) {
	s, err := Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	es, err := s.LoadEntities()
	var out []string
	for _, e := range es {
		out = append(out, e.GID)
	}
	return out, err
}

// update runs fn in a write transaction shared with the other writes of
// the moment (groupcommit.go): the forward path's records of twenty panes
// briefed at once take one fsync, not twenty. fn may run twice, so it
// must reset whatever it records.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if err := s.errDiskFull(); err != nil {
		return err
	}
	if err := s.writer.Write(fn); err != nil {
		if errors.Is(err, ErrWriterClosed) {
			return fmt.Errorf("bridge: state file %s is closed", s.path)
		}
		return err
	}
	return nil
}
