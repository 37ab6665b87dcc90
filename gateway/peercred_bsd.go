//go:build darwin || freebsd

package gateway

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads the effective uid the kernel recorded for the process at
// the other end of c (LOCAL_PEERCRED); the pid is not reported here.
func peerCred(c *net.UnixConn) (peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var (
		cred *unix.Xucred
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if serr != nil {
		return peer{}, serr
	}
	return peer{uid: cred.Uid, pid: -1}, nil
}
