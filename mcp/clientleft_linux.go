package mcp

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// clientClosed reports whether the peer of a TCP connection has sent its
// FIN or a reset: the kernel's state for the socket is no longer
// ESTABLISHED, whatever bytes (a TLS close_notify) are still unread.
func clientClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		closed = err == nil && info.State != unix.BPF_TCP_ESTABLISHED
	})
	return closed
}
