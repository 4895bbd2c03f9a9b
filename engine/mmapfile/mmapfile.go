// Package mmapfile opens a file as a read-only byte slice: memory-mapped
// on Linux and macOS (so a 1.5 GB model costs page cache, not heap), read
// into memory elsewhere.
package mmapfile

import (
	"fmt"
	"os"
)

// File is an opened file's contents. Data is valid until Close.
type File struct {
	Data  []byte
	Path  string
	close func() error
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
	data, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &File{Data: data, Path: path, close: unmap}, nil
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
