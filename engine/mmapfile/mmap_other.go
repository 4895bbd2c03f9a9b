//go:build !linux && !darwin

package mmapfile

import "os"

func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	return readAll(f, size)
}
