package flm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/jsonedit"
)

// FuzzReadModelList: no model_list.json crashes the readers (Discover,
// GetEntry, HasEntry), and the models folder Discover takes from any
// list stays inside FastFlowLM's root.
func FuzzReadModelList(f *testing.F) {
	for _, s := range []string{
		EmptyList, `{}`, `{"model_path": "store/flm", "models": {"minicpm5": {"2b": {"name": "MiniCPM5-2B-NPU2"}}}}`,
		`{"model_path": "../..", "models": {}}`, `{"model_path": "C:\\x"}`, `{"model_path": 5}`,
		`{"models": {"minicpm5": []}}`, `{"model_path": "a/./b/../../.."}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		listFile := filepath.Join(root, "model_list.json")
		if err := os.WriteFile(listFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		p := fakeFS{files: set(filepath.Join(root, "flm"), listFile)}.probe("linux", map[string]string{"HOME": "/home/u"})
		p.Root = root
		l := Discover(context.Background(), p)
		if l.ModelsDirErr == nil {
			rel, err := filepath.Rel(root, l.ModelsDir)
			if err != nil || !filepath.IsLocal(rel) {
				t.Fatalf("list %q leads the models folder to %s, outside %s", data, l.ModelsDir, root)
			}
		}
		b, err := ReadList(listFile)
		if err != nil {
			t.Fatal(err)
		}
		o, err := jsonedit.ParseObject(b)
		if err != nil {
			return
		}
		GetEntry(o, "minicpm5", "2b")
		HasEntry(o, "minicpm5", "2b", "MiniCPM5-2B-NPU2")
		// Windows reads \ as a separator too.
		if mp, err := ModelPath(o); err == nil && !filepath.IsLocal(strings.ReplaceAll(mp, `\`, "/")) {
			t.Fatalf("ModelPath accepted %q, which leads out of the models home", mp)
		}
	})
}
