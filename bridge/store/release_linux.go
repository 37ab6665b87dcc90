package store

import (
	"os"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ReleaseMapped drops this process's mappings of the state file's pages
// (MADV_DONTNEED on bbolt's shared, read-only map). bbolt rewrites pages
// copy-on-write, so a file that has seen many small transactions has had
// most of its pages faulted into the map at some point; they would stay
// counted in the gateway's RSS although nothing reads them any more. The
// data stays in the kernel's page cache (clean, reclaimable) and a later
// read maps it again. Runs inside a read transaction, which holds off
// bbolt's remapping.
func (s *Store) ReleaseMapped() error {
	return s.db.View(func(tx *bolt.Tx) error {
		addr, size := s.db.Info().Data, tx.Size()
		// never past the file: a damaged one could claim more pages than
		// bbolt mapped, and the range would reach the next mapping
		if fi, err := os.Stat(s.path); err == nil {
			size = min(size, fi.Size())
		}
		if addr == 0 || size <= 0 {
			return nil
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(size), unix.MADV_DONTNEED)
		if errno != 0 {
			return errno
		}
		return nil
	})
}
