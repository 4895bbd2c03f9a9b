//go:build unix

package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestModelFolderFIFOsRefused: a FIFO in place of a model folder's
// tokenizer.json, tokenizer_config.json or chat_template.jinja, or a
// giant tokenizer_config.json, is an error naming it, at once (an
// ordinary read of a FIFO waits for a writer for ever).
func TestModelFolderFIFOsRefused(t *testing.T) {
	for _, tc := range []struct {
		file, says string
		giant      bool
		load       func(dir string) error
	}{
		{"tokenizer.json", "not a regular file", false, func(dir string) error { _, err := Load(dir); return err }},
		{"tokenizer_config.json", "not a regular file", false, func(dir string) error { _, err := LoadConfig(dir, nil); return err }},
		{"chat_template.jinja", "not a regular file", false, func(dir string) error { _, err := ChatTemplateSource(dir); return err }},
		{"tokenizer_config.json", "larger than this kind of file may be", true, func(dir string) error { _, err := LoadConfig(dir, nil); return err }},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, tc.file)
		var err error
		if tc.giant {
			err = os.WriteFile(path, []byte(`{"chat_template": "`+strings.Repeat("x", maxConfigBytes)+`"}`), 0o600)
		} else {
			err = syscall.Mkfifo(path, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.load(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want one naming it and saying %q", tc.file, err, tc.says)
		}
	}
}
