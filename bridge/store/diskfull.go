package store

import (
	"fmt"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// A fault hook for the simulator and tests: SetDiskFull(true) makes every
// write of the store fail as a full disk makes it fail — the journal's
// appends, the group writer's commits (the lazy request records riding
// them included) and the direct write transactions — with an error that
// wraps syscall.ENOSPC, until SetDiskFull(false). Reads keep working, as
// they do on a full disk. Production never sets it; its cost there is one
// atomic load per write.

// SetDiskFull turns the simulated full disk on or off.
func (s *Store) SetDiskFull(full bool) { s.diskFull.Store(full) }

// errDiskFull is the simulated full disk's error (nil when it is off).
func (s *Store) errDiskFull() error {
	if !s.diskFull.Load() {
		return nil
	}
	return fmt.Errorf("store: writing %s: %w (simulated by SetDiskFull)", s.path, syscall.ENOSPC)
}

// dbUpdate is s.db.Update behind the simulated full disk: every write
// transaction of the store that is not group-committed goes through it.
func (s *Store) dbUpdate(fn func(*bolt.Tx) error) error {
	if err := s.errDiskFull(); err != nil {
		return err
	}
	return s.db.Update(fn)
}
