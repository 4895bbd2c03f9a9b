// Package mmapfile opens a file as a read-only byte slice: memory-mapped
// on Linux and macOS (so a 1.5 GB model costs page cache, not heap), read
// into memory elsewhere.
package mmapfile

import (
	"fmt"
	"os"
	"unsafe"
)

// File is an opened file's contents. Data is valid until Close.
type File struct {
	Data   []byte
	Path   string
	close  func() error
	mapped bool
}

// Open maps or reads path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	size := st.Size()
	if size == 0 {
		return &File{Data: nil, Path: path, close: func() error { return nil }}, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s: %d bytes do not fit in memory", path, size)
	}
	data, unmap, mapped, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &File{Data: data, Path: path, close: unmap, mapped: mapped}, nil
}

// Close releases the mapping. Data must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.close == nil {
		return nil
	}
	c := f.close
	f.close = nil
	f.Data = nil
	return c()
}

// Contains reports whether b lies inside f's data.
func (f *File) Contains(b []byte) bool {
	if f == nil || len(b) == 0 || len(f.Data) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&f.Data[0]))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(f.Data))
}

// WillNeed tells the system that b, a part of f's data, is about to be
// read from end to end: on Linux the file's pages are read ahead in the
// background (MADV_WILLNEED), so that reading b later finds them in the
// page cache rather than waiting on the disk. Elsewhere, and for data
// read into memory, it does nothing.
func (f *File) WillNeed(b []byte) {
	if f.Contains(b) && f.mapped {
		willNeed(b)
	}
}

// Release tells the system that b, a part of f's data, will not be read
// for a while: on Linux its mapped pages leave the process's resident
// memory (they stay in the page cache, and reading b again maps them
// back). Elsewhere it does nothing. b must lie inside f's data.
func (f *File) Release(b []byte) {
	if f.Contains(b) && f.mapped {
		release(b)
	}
}
