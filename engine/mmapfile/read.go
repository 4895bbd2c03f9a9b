package mmapfile

import (
	"io"
	"os"
)

// readAll is the fallback: the whole file in heap memory.
func readAll(f *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
