//go:build !linux && !darwin

package mmapfile

import "os"

func mapFile(f *os.File, size int) ([]byte, func() error, bool, error) {
	d, c, err := readAll(f, size)
	return d, c, false, err
}
