//go:build unix

package config

import (
	"os"
	"syscall"
)

// openNoBlock opens path for reading without waiting for a writer (a
// FIFO opened this way returns at once).
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
