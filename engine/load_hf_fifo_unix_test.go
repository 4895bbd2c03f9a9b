//go:build unix

package engine

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHFConfigFIFORefused: a FIFO in place of a Hugging Face folder's
// config.json is an error naming it, at once, not a read that waits for
// a writer for ever.
func TestHFConfigFIFORefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readHFConfig(dir, "safetensors"); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err = %v, want one naming %s as not a regular file", err, path)
	}
}
