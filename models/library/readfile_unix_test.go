//go:build unix

package library

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHostileLibraryFiles: a FIFO or a giant file at library.json, and a
// FIFO chosen as a model file, are refused at once with errors naming
// them (an ordinary open of a FIFO waits for a writer for ever).
func TestHostileLibraryFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "library.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	giant := filepath.Join(dir, "giant.json")
	if err := os.WriteFile(giant, []byte(`{"models": [], "pad": "`+strings.Repeat("x", maxLibraryBytes)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(model, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, says string
		do         func(string) error
	}{
		{fifo, "not a regular file", func(p string) error { _, err := readLegacy(p); return err }},
		{giant, "larger than this kind of file may be", func(p string) error { _, err := readLegacy(p); return err }},
		{model, "not a regular file", func(p string) error { _, err := Detect(p); return err }},
	} {
		if err := tc.do(tc.path); err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want one naming it and saying %q", filepath.Base(tc.path), err, tc.says)
		}
	}
}
