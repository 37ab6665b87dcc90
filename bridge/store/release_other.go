//go:build !linux

package store

// ReleaseMapped is a no-op where MADV_DONTNEED on a shared map is not
// known to be safe.
func (s *Store) ReleaseMapped() error { return nil }
