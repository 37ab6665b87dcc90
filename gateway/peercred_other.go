//go:build !linux && !darwin && !freebsd

package gateway

import "net"

// peerCred is not implemented on this system: the socket's 0600 mode
// inside the 0700 state dir is then the only check.
func peerCred(*net.UnixConn) (peer, error) { return peer{}, errNoPeerCred }
