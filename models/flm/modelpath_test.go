package flm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelPathRefusesEscapes: a model_path in FastFlowLM's
// model_list.json that could lead out of the FastFlowLM models home
// (absolute on any system, or with "..") is refused with an error that
// names the list file, the entry and the value; Discover then knows no
// models folder, so nothing is read, written or deleted through it.
func TestModelPathRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, raw string // raw: the model_path's JSON value; "" for none
		want      string // the models folder under the root, "" when refused
	}{
		{"absent", "", "models"},
		{"FastFlowLM's own", `"models"`, "models"},
		{"empty", `""`, "models"},
		{"a subfolder", `"store/flm"`, "store/flm"},
		{"absolute", `"/etc"`, ""},
		{"parent", `"../.."`, ""},
		{"parent inside", `"models/../../outside"`, ""},
		{"Windows parent", `"models\\..\\..\\outside"`, ""},
		{"Windows drive", `"C:\\Windows"`, ""},
		{"Windows drive-relative", `"C:models"`, ""},
		{"UNC share", `"\\\\server\\share"`, ""},
		{"not a string", `5`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			list := `{"models": {}}`
			if tc.raw != "" {
				list = `{"model_path": ` + tc.raw + `, "models": {}}`
			}
			listFile := filepath.Join(root, "model_list.json")
			if err := os.WriteFile(listFile, []byte(list), 0o644); err != nil {
				t.Fatal(err)
			}
			p := fakeFS{files: set(filepath.Join(root, "flm"), listFile)}.probe("linux", map[string]string{"HOME": "/home/u"})
			p.Root = root
			l := Discover(context.Background(), p)
			if tc.want != "" {
				if l.ModelsDirErr != nil || l.ModelsDir != filepath.Join(root, tc.want) {
					t.Fatalf("ModelsDir %q, err %v; want %s", l.ModelsDir, l.ModelsDirErr, filepath.Join(root, tc.want))
				}
				return
			}
			if l.ModelsDirErr == nil {
				t.Fatalf("model_path %s accepted: ModelsDir %q", tc.raw, l.ModelsDir)
			}
			msg := l.ModelsDirErr.Error()
			for _, want := range []string{listFile, `"model_path"`, strings.Trim(strings.ReplaceAll(tc.raw, `\\`, `\`), `"`)} {
				if !strings.Contains(strings.ReplaceAll(msg, `\\`, `\`), want) {
					t.Errorf("the error does not name %q: %s", want, msg)
				}
			}
			if l.ModelsDir != "" || l.ModelDir("MiniCPM5-2B-NPU2") != "" {
				t.Errorf("a refused model_path still gives ModelsDir %q, ModelDir %q", l.ModelsDir, l.ModelDir("MiniCPM5-2B-NPU2"))
			}
			if len(l.Notes) == 0 || l.Notes[len(l.Notes)-1] != msg {
				t.Errorf("the notes do not say it: %q", l.Notes)
			}
		})
	}
}
