package safefile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		max  int64
		want string
		err  error
		says string
	}{
		{name: "regular", path: small, max: 100, want: `{"a":1}`},
		{name: "exactly the cap", path: small, max: 7, want: `{"a":1}`},
		{name: "one byte over", path: small, max: 6, err: ErrTooLarge, says: "7 bytes, and the limit is 6 bytes"},
		{name: "giant", path: big, max: 1 << 20, err: ErrTooLarge, says: "big.json: larger than this kind of file may be: 3.0 MiB, and the limit is 1.0 MiB"},
		{name: "folder", path: dir, max: 100, err: ErrNotRegular, says: "it is a folder"},
		{name: "missing", path: filepath.Join(dir, "none"), max: 100, err: fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadFile(tc.path, tc.max)
			if tc.err == nil {
				if err != nil || string(b) != tc.want {
					t.Fatalf("got %q, %v; want %q", b, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want %v naming %s and saying %q", err, tc.err, tc.path, tc.says)
			}
		})
	}
}

// TestFileGrowsAfterOpen: a file that grows past its cap after the
// check is still read only up to the cap, then refused.
func TestFileGrowsAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString(strings.Repeat("x", 100))
	w.Close()
	b, err := io.ReadAll(f)
	if !errors.Is(err, ErrTooLarge) || len(b) != 10 {
		t.Fatalf("read %d bytes, err %v; want the 10 of the cap and ErrTooLarge", len(b), err)
	}
}

// TestWriteAtomic: the file has its mode from the first byte, a missing
// folder is made private for a private file, and a write that cannot
// rename leaves the old file and no temporary file behind.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	path := filepath.Join(dir, "token")
	if err := WriteAtomic(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder: %v %v", fi, err)
	}
	// a folder where the file should go: the rename fails
	bad := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(bad, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(bad, []byte("two"), 0o600); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("rename over a folder: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Fatalf("the other file changed: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a temporary file was left: %s", e.Name())
		}
	}
}
