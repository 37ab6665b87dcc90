//go:build !linux

package store

import "os"

// datasync is fsync(2) where fdatasync(2) is not offered.
func datasync(f *os.File) error { return f.Sync() }
