//go:build unix

package gateway

import "syscall"

// detached puts the started gateway in its own session (and so its own
// process group, with no controlling terminal).
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
