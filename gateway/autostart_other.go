//go:build !unix

package gateway

import "syscall"

func detached() *syscall.SysProcAttr { return nil }
