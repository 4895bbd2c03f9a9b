//go:build linux || darwin

package mmapfile

import (
	"os"
	"syscall"
)

func mapFile(f *os.File, size int) ([]byte, func() error, bool, error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		d, c, err := readAll(f, size)
		return d, c, false, err
	}
	return data, func() error { return syscall.Munmap(data) }, true, nil
}
