//go:build unix

package engine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenKVFileRefusesWhatIsNotAFile: OpenKVFile opens a regular file
// and refuses at once (never waiting for a writer) a FIFO, a folder and
// a symbolic link named like a KV file, and ReadKVHeader and IsOldKVFile
// never see them.
func TestOpenKVFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular.kv")
	if err := os.WriteFile(regular, []byte("NPUCHATKV1\nold"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		make func(path string) error
		ok   bool
	}{
		{"a regular file", func(path string) error { return os.WriteFile(path, []byte("NPUCHATKV1\nold"), 0o600) }, true},
		{"a FIFO", func(path string) error { return syscall.Mkfifo(path, 0o600) }, false},
		{"a folder", func(path string) error { return os.Mkdir(path, 0o700) }, false},
		{"a symbolic link", func(path string) error { return os.Symlink(regular, path) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "chat-1-0123.kv")
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			f, err := OpenKVFile(p)
			if (err == nil) != c.ok {
				t.Fatalf("OpenKVFile of %s: %v", c.name, err)
			}
			if f != nil {
				f.Close()
			}
			if old := IsOldKVFile(p); old != c.ok {
				t.Errorf("IsOldKVFile of %s (a version 1 file's bytes where it is a file): %v", c.name, old)
			}
		})
	}
}
