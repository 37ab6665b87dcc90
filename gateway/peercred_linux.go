package gateway

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred reads the credentials the kernel recorded for the process at the
// other end of c when it connected (SO_PEERCRED): they cannot be forged by
// the peer.
func peerCred(c *net.UnixConn) (peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var (
		cred *unix.Ucred
		serr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if serr != nil {
		return peer{}, serr
	}
	return peer{uid: cred.Uid, pid: int(cred.Pid)}, nil
}
