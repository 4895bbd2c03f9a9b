//go:build unix

package safefile

import (
	"os"
	"syscall"
)

// openNoBlock opens path for reading without waiting for a writer: a
// FIFO opened this way returns at once (and is then refused by its mode).
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
