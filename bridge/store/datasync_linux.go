package store

import (
	"fmt"
	"os"
	"syscall"
)

// datasync is fdatasync(2) (the data and the size, not the timestamps),
// as bbolt's own commits on Linux.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("fdatasync: %w", serr)
	}
	return nil
}
