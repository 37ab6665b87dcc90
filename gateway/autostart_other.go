//go:build !unix

package gateway

import (
	"syscall"
	"time"
)

func detached() *syscall.SysProcAttr { return nil }

// lockStart: no start lock here; the gateway's own store lock still
// leaves one gateway standing.
func lockStart(string, time.Time) (func(), error) { return func() {}, nil }
