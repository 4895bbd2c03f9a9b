package cpu

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadErrorSaysLoadOnce: a model whose file is gone fails to load
// with an error that says "load <path>" once (the engine's), not once
// more for each layer that wrapped it, and is still a missing file.
func TestLoadErrorSaysLoadOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.gguf")
	err := New(Options{Path: path}).Load(context.Background(), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("loading a missing file: %v, want fs.ErrNotExist", err)
	}
	if n := strings.Count(err.Error(), "load "+path); n != 1 {
		t.Errorf("error %q says load %s %d times, want once", err, path, n)
	}
}
