//go:build unix

package oflm

import (
	"os"
	"syscall"
)

// nilSignal probes whether a process exists (kill(pid, 0)).
func nilSignal() os.Signal { return syscall.Signal(0) }
