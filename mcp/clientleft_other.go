//go:build !linux

package mcp

import "net"

// clientClosed: only Linux's TCP_INFO is read; elsewhere the request's
// context (net/http's read of the peer's EOF) is the only check.
func clientClosed(net.Conn) bool { return false }
