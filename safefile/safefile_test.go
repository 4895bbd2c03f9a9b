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
