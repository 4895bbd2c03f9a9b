package library

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadLegacy: no library.json (where earlier versions kept the added
// models, moved into the settings once) crashes readLegacy, and an
// error names the file.
func FuzzReadLegacy(f *testing.F) {
	for _, s := range []string{
		`{"models": []}`, `{}`, ``, `null`,
		`{"models": [{"name": "tiny", "path": "/m/tiny.gguf", "format": "gguf", "added": "2026-12-01T10:00:00Z"}]}`,
		`{"models": [{"name": "a", "path": "/a", "format": "q4nx", "added": "2026-12-01T10:00:00+05:30"}, {"name": "A"}]}`,
		`{"models": {"name": 1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "library.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readLegacy(path); err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
	})
}
