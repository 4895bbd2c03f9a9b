//go:build unix

package engine

import (
	"os"
	"syscall"
)

// openKVFlags open a KV file without waiting for a writer (a FIFO named
// like one returns at once) and without following a symbolic link in its
// place.
const openKVFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOFOLLOW
