package library

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzOpen: no library.json crashes Open, an error names the file, and a
// library it accepts, written back as Add does and opened again, holds
// the same entries.
func FuzzOpen(f *testing.F) {
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
		l, err := Open(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		want := l.Entries()
		if err := l.write(want); err != nil {
			t.Fatalf("a library Open accepted (%q) cannot be written back: %v", data, err)
		}
		l2, err := Open(path)
		if err != nil {
			t.Fatalf("the written library is refused: %v", err)
		}
		got := l2.Entries()
		if len(got) != len(want) {
			t.Fatalf("%d entries written, %d read back", len(want), len(got))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Name != w.Name || g.Path != w.Path || g.Format != w.Format || !g.Added.Equal(w.Added) {
				t.Fatalf("entry %d: wrote %+v, read back %+v", i, w, g)
			}
		}
	})
}
