package check

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// FS is the file tree the checks read: sysfs, procfs, /dev and /lib. Names
// are absolute slash paths as on the live system ("/sys/bus/pci/devices").
type FS interface {
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the sorted names in a directory.
	ReadDir(name string) ([]string, error)
	Readlink(name string) (string, error)
	// Exists reports whether name exists (following symlinks).
	Exists(name string) bool
	// Glob returns the sorted names matching a path.Match pattern in the
	// last element of pattern only ("/usr/lib/libxrt_driver_xdna.so*").
	Glob(pattern string) ([]string, error)
}

// DirFS is the tree under a root directory: "/" is the live system, a
// folder written by [Record] a recorded one.
type DirFS string

func (d DirFS) path(name string) string {
	return filepath.Join(string(d), filepath.FromSlash(name))
}

// ReadFile reads a file.
func (d DirFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(d.path(name)) }

// ReadDir lists a directory.
func (d DirFS) ReadDir(name string) ([]string, error) {
	entries, err := os.ReadDir(d.path(name))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Name() != emptyDirMarker {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// emptyDirMarker is written into a recorded folder that was empty, so
// that it survives git (which keeps no empty folders); ReadDir hides it.
const emptyDirMarker = ".npuchat-empty-dir"

// Readlink reads a symbolic link.
func (d DirFS) Readlink(name string) (string, error) { return os.Readlink(d.path(name)) }

// Exists reports whether name exists.
func (d DirFS) Exists(name string) bool {
	_, err := os.Stat(d.path(name))
	return err == nil
}

// Glob matches the last element of pattern.
func (d DirFS) Glob(pattern string) ([]string, error) {
	names, err := d.ReadDir(path.Dir(pattern))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, n := range names {
		if ok, err := path.Match(path.Base(pattern), n); err != nil {
			return nil, err
		} else if ok {
			out = append(out, path.Join(path.Dir(pattern), n))
		}
	}
	return out, nil
}

// readString reads a sysfs-style one-line file, trimmed.
func readString(f FS, name string) (string, error) {
	b, err := f.ReadFile(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// recordingFS remembers everything read through it, so that [Record] can
// write exactly those files and nothing else.
type recordingFS struct {
	inner FS
	mu    sync.Mutex
	files map[string][]byte
	dirs  map[string][]string
	links map[string]string
	exist map[string]bool
}

func newRecordingFS(inner FS) *recordingFS {
	return &recordingFS{inner: inner, files: map[string][]byte{}, dirs: map[string][]string{},
		links: map[string]string{}, exist: map[string]bool{}}
}

func (r *recordingFS) ReadFile(name string) ([]byte, error) {
	b, err := r.inner.ReadFile(name)
	if err == nil {
		r.mu.Lock()
		r.files[name] = b
		r.mu.Unlock()
	}
	return b, err
}

func (r *recordingFS) ReadDir(name string) ([]string, error) {
	names, err := r.inner.ReadDir(name)
	if err == nil {
		r.mu.Lock()
		r.dirs[name] = names
		r.mu.Unlock()
	}
	return names, err
}

func (r *recordingFS) Readlink(name string) (string, error) {
	t, err := r.inner.Readlink(name)
	if err == nil {
		r.mu.Lock()
		r.links[name] = t
		r.mu.Unlock()
	}
	return t, err
}

func (r *recordingFS) Glob(pattern string) ([]string, error) {
	names, err := r.inner.Glob(pattern)
	r.mu.Lock()
	for _, n := range names {
		r.exist[n] = true
	}
	r.mu.Unlock()
	return names, err
}

func (r *recordingFS) Exists(name string) bool {
	ok := r.inner.Exists(name)
	if ok {
		r.mu.Lock()
		r.exist[name] = true
		r.mu.Unlock()
	}
	return ok
}

// writeTree writes what was read under dir: files with their content,
// symlinks with their target, existing paths (device nodes, firmware and
// library files) as empty files, and listed directory entries that were not
// read further as empty files too, so that a listing gives the same names.
func (r *recordingFS) writeTree(dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
	written := map[string]bool{}
	mark := func(name string) {
		for p := name; p != "/" && p != "."; p = path.Dir(p) {
			written[p] = true
		}
	}
	for _, name := range sortedKeys(r.files) {
		if err := os.MkdirAll(filepath.Dir(target(name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target(name), r.files[name], 0o644); err != nil {
			return err
		}
		mark(name)
	}
	for _, name := range sortedKeys(r.links) {
		if written[name] {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target(name)), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(r.links[name], target(name)); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("symlink %s: %w", name, err)
		}
		mark(name)
	}
	for _, name := range sortedKeys(r.exist) {
		if written[name] || r.dirs[name] != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target(name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target(name), nil, 0o644); err != nil {
			return err
		}
		mark(name)
	}
	for _, name := range sortedKeys(r.dirs) {
		if err := os.MkdirAll(target(name), 0o755); err != nil {
			return err
		}
		if len(r.dirs[name]) == 0 {
			if err := os.WriteFile(filepath.Join(target(name), emptyDirMarker), nil, 0o644); err != nil {
				return err
			}
		}
		for _, e := range r.dirs[name] {
			child := path.Join(name, e)
			if written[child] {
				continue
			}
			if err := os.WriteFile(target(child), nil, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
