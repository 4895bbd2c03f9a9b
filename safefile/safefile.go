// Package safefile opens and reads files that another program or person
// could have replaced with something else: FastFlowLM's model_list.json,
// the settings, the model library, the Hugging Face token, a model
// folder's JSON files.
//
// A FIFO at such a path would block an ordinary open until a writer came
// (NPU Chat never listened, and ignored SIGTERM, with one at
// model_list.json); a device or a giant file would be read without end
// (a 208 MB model_list.json took 24 s and 938 MB). Open opens without
// blocking (O_NONBLOCK on Unix), checks on the open file that it is a
// regular file, refuses one larger than the caller's cap, and reads at
// most that cap even if the file grows; every refusal names the file and
// says what to do.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular says the path is a FIFO, device, socket or folder where
// a regular file was expected.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge says the file is larger than its cap.
var ErrTooLarge = errors.New("larger than this kind of file may be")

// File is a regular file open for reading, which reads at most its cap.
type File struct {
	f    *os.File
	name string
	max  int64
	read int64
}

// Open opens path for reading without blocking: anything but a regular
// file (a FIFO, device, socket, folder) is an error wrapping
// ErrNotRegular, and a file of more than maxBytes one wrapping
// ErrTooLarge; a missing file is an error wrapping fs.ErrNotExist.
func Open(path string, maxBytes int64) (*File, error) {
	f, err := openNoBlock(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (it is %s): replace it with the file it should be, or delete it", ErrNotRegular, kind(fi.Mode()))}
	}
	if fi.Size() > maxBytes {
		f.Close()
		return nil, tooLarge(path, fi.Size(), maxBytes)
	}
	return &File{f: f, name: path, max: maxBytes}, nil
}

// Read reads from the file; past the cap (the file grew after Open) it
// is an error wrapping ErrTooLarge.
func (f *File) Read(p []byte) (int, error) {
	if f.read >= f.max {
		// One byte more says whether the file goes on.
		var one [1]byte
		n, err := f.f.Read(one[:])
		if n > 0 {
			return 0, tooLarge(f.name, f.read+1, f.max)
		}
		return 0, err
	}
	if int64(len(p)) > f.max-f.read {
		p = p[:f.max-f.read]
	}
	n, err := f.f.Read(p)
	f.read += int64(n)
	return n, err
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Name is the path the file was opened by.
func (f *File) Name() string { return f.name }

// ReadFile reads the whole regular file at path, of at most maxBytes, as
// Open checks it.
func ReadFile(path string, maxBytes int64) ([]byte, error) {
	f, err := Open(path, maxBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func tooLarge(path string, size, limit int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %s, and the limit is %s; replace it with the file it should be, or delete it", ErrTooLarge, bytesText(size), bytesText(limit))}
}

// bytesText is a size for people, in binary units ("208.0 MiB").
func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// kind names a file mode's type for people.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return "not a plain file"
}
