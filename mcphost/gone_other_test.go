//go:build unix && !linux

package mcphost

import (
	"errors"
	"syscall"
)

// gone reports whether no process has pid.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
