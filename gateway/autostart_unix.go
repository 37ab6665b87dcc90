//go:build unix

package gateway

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// detached puts the started gateway in its own session (and so its own
// process group, with no controlling terminal).
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// lockStart takes the exclusive lock on path (waiting until deadline), so
// callers starting a gateway for one state dir go one at a time.
func lockStart(path string, deadline time.Time) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errors.New("another command is still starting the gateway")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
