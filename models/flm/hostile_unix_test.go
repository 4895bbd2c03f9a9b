//go:build unix

package flm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/npuchat/npuchat/jsonedit"
)

// TestHostileModelList: a FIFO or a giant file at FastFlowLM's
// model_list.json is refused at once with a note naming it, and
// Discover goes on with the default models folder (a FIFO used to block
// start-up for ever, before the server listened; a 208 MB list took 24 s
// and 938 MB). Editing such a list is refused too.
func TestHostileModelList(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		says string
	}{
		{"FIFO", func(path string) error { return syscall.Mkfifo(path, 0o600) }, "not a regular file (it is a FIFO)"},
		{"giant", func(path string) error {
			return os.WriteFile(path, []byte(`{"model_path": "models", "models": {}, "pad": "`+strings.Repeat("x", MaxJSONBytes)+`"}`), 0o644)
		}, "larger than this kind of file may be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			listFile := filepath.Join(root, "model_list.json")
			if err := tc.make(listFile); err != nil {
				t.Fatal(err)
			}
			p := fakeFS{files: set(filepath.Join(root, "flm"), listFile)}.probe("linux", map[string]string{"HOME": "/home/u"})
			p.Root = root
			l := Discover(context.Background(), p)
			if l.ModelsDir != filepath.Join(root, "models") {
				t.Errorf("ModelsDir %q, want the default %s", l.ModelsDir, filepath.Join(root, "models"))
			}
			notes := strings.Join(l.Notes, "\n")
			if !strings.Contains(notes, listFile) || !strings.Contains(notes, tc.says) {
				t.Errorf("notes %q, want one naming %s and saying %q", notes, listFile, tc.says)
			}
			_, err := EditJSONFile(listFile, func(*jsonedit.Object) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("EditJSONFile: err = %v, want one saying %q", err, tc.says)
			}
		})
	}
}
