//go:build unix

package instance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateTempDir: without XDG_RUNTIME_DIR, a 0700 folder in the
// temporary folder; one someone made ahead of us, open to others, is
// refused.
func TestPrivateTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir, err := DefaultDir("linux", func(string) string { return "" })
	if err != nil || filepath.Dir(dir) != tmp {
		t.Fatalf("%q %v", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 || !strings.Contains(dir, "npuchat-") {
		t.Fatalf("%s: %v %v", dir, fi, err)
	}
	os.Chmod(dir, 0o777)
	if _, err := DefaultDir("linux", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "only this user") {
		t.Fatalf("a 0777 folder: %v", err)
	}
}
