package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadSettings: no settings file crashes the reader, an error names
// the file, and a file it accepts, saved as Save does and read again,
// gives the same settings.
func FuzzReadSettings(f *testing.F) {
	for _, s := range []string{
		`{}`, "", "\ufeff{\"model\": \"minicpm5:2b\"}",
		`{"addr": "127.0.0.1:8001", "engine": "cpu", "keep_alive": "5m", "queue_size": 4, "origins": ["http://a"], "serve_at_start": true}`,
		`{"threads": -1, "context_length": 1e3}`, `[1, 2]`, `{"origins": []}`, `{"model": "\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := WriteSettingsFile(path, data); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSettings(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatalf("settings read from %q do not encode: %v", data, err)
		}
		if err := WriteSettingsFile(path, b); err != nil {
			t.Fatal(err)
		}
		again, err := ReadSettings(path)
		if err != nil {
			t.Fatalf("the saved settings %s are refused: %v", b, err)
		}
		if b2, _ := json.MarshalIndent(again, "", "  "); !bytes.Equal(b, b2) {
			t.Fatalf("settings changed on a save and read:\n%s\n%s", b, b2)
		}
	})
}
