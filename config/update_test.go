package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpdateSettingsKeepsTheOtherKeys: changing settings changes those
// keys alone; every other key keeps its value and its place, new keys
// go at the end, a nil value removes a key (and an object it empties);
// a file that is not a JSON object is refused, named, and left as it
// was.
func TestUpdateSettingsKeepsTheOtherKeys(t *testing.T) {
	tests := []struct {
		name    string
		file    string // "" = no file
		changes []Change
		want    string // the file after; "" = unchanged (with wantErr)
		wantErr string
	}{
		{"no file", "", []Change{{"engine", "cpu"}},
			"{\n  \"engine\": \"cpu\"\n}\n", ""},
		{"blank file", " \n", []Change{{"serve_at_start", true}},
			"{\n  \"serve_at_start\": true\n}\n", ""},
		{"unknown keys kept in place", `{"from_a_newer_version": {"x": [1, 2]}, "engine": "auto", "threads": 2, "my_note": "hand-written"}`,
			[]Change{{"engine", "npu"}},
			`{"from_a_newer_version": {"x": [1, 2]}, "engine": "npu", "threads": 2, "my_note": "hand-written"}` + "\n", ""},
		{"new key at the end", `{"threads":2,"zzz":null}`, []Change{{"engine", "cpu"}, {"serve_at_start", false}},
			"{\"threads\":2,\"zzz\":null,\n  \"engine\":\"cpu\",\n  \"serve_at_start\":false}\n", ""},
		{"numbers kept as written", `{"temperature_scale": 1.50, "big": 12345678901234567890}`, []Change{{"engine", "cpu"}},
			"{\"temperature_scale\": 1.50, \"big\": 12345678901234567890,\n  \"engine\": \"cpu\"}\n", ""},
		{"nested key keeps its siblings", `{"chat": {"top_p": 0.9, "future": "x"}, "engine": "cpu"}`, []Change{{"chat.temperature", 0.5}},
			"{\"chat\": {\"top_p\": 0.9, \"future\": \"x\",\n    \"temperature\": 0.5}, \"engine\": \"cpu\"}\n", ""},
		{"nested object made", `{"engine": "cpu"}`, []Change{{"chat.max_tokens", 256}},
			"{\"engine\": \"cpu\",\n  \"chat\": {\n    \"max_tokens\": 256\n  }}\n", ""},
		{"nil removes; an emptied object goes", `{"keep_alive": "5m", "chat": {"top_p": 0.9}, "x": 1}`, []Change{{"keep_alive", nil}, {"chat.top_p", nil}, {"gone.already", nil}},
			"{\"x\": 1}\n", ""},
		{"a key written twice: its first place, the change", `{"engine": "npu", "threads": 1, "engine": "auto"}`, []Change{{"engine", "cpu"}},
			"{\n  \"engine\": \"cpu\",\n  \"threads\": 1\n}\n", ""},
		// Notepad on Windows may save "UTF-8 with BOM": the mark is not
		// JSON, and no one can see it to remove it.
		{"byte order mark", "\ufeff{\"threads\": 2}", []Change{{"engine", "cpu"}},
			"{\"threads\": 2,\n  \"engine\": \"cpu\"}\n", ""},
		{"a file as Save writes it: only the changed line differs", "{\n    \"engine\": \"auto\",\n    \"keep_alive\": \"5m\",\n    \"chat\": {\n        \"top_p\": 0.9\n    }\n}\n",
			[]Change{{"keep_alive", "-1"}, {"chat.temperature", 0.2}},
			"{\n    \"engine\": \"auto\",\n    \"keep_alive\": \"-1\",\n    \"chat\": {\n        \"top_p\": 0.9,\n        \"temperature\": 0.2\n    }\n}\n", ""},
		{"not JSON", `{"engine": "cpu",`, []Change{{"engine", "npu"}}, "", "not a valid JSON object"},
		{"trailing text", `{"engine": "cpu"} and my notes`, []Change{{"engine", "npu"}}, "", "more after the object"},
		{"an array", `["engine", "cpu"]`, []Change{{"engine", "npu"}}, "", "an array, not an object"},
		{"null", `null`, []Change{{"engine", "npu"}}, "", "null, not an object"},
		{"nested parent not an object", `{"chat": [1], "engine": "cpu"}`, []Change{{"engine", "npu"}, {"chat.top_p", 0.5}}, "", `"chat" is not an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "npuchat", "settings.json")
			if tt.file != "" {
				os.MkdirAll(filepath.Dir(path), 0o700)
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := UpdateSettings(path, tt.changes...)
			b, rerr := os.ReadFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "nothing was changed") {
					t.Errorf("UpdateSettings = %v; want an error naming %s that says %q and that nothing was changed", err, path, tt.wantErr)
				}
				if string(b) != tt.file {
					t.Errorf("the refused file changed:\n%s\nwas\n%s", b, tt.file)
				}
				return
			}
			if err != nil || rerr != nil {
				t.Fatalf("UpdateSettings: %v (read: %v)", err, rerr)
			}
			if string(b) != tt.want {
				t.Errorf("file after:\n%s\nwant\n%s", b, tt.want)
			}
			if _, err := ReadSettings(path); err != nil {
				t.Errorf("Load cannot read the file it wrote: %v", err)
			}
		})
	}
}

// TestUpdateSettingsRefusesWhatIsNotAFile: a settings path that is a
// folder is an error, not a hang or a replaced folder.
func TestUpdateSettingsRefusesWhatIsNotAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := UpdateSettings(path, Change{"engine", "cpu"}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("UpdateSettings on a folder: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Fatalf("the folder is gone: %v", err)
	}
}

// TestSettingsChangeKeepsASymlinkedFile: a settings file that is a
// symbolic link (kept with the user's dotfiles, say) is changed where it
// points; the link stays a link, instead of being replaced by a copy
// that the dotfiles no longer see.
func TestSettingsChangeKeepsASymlinkedFile(t *testing.T) {
	dir := t.TempDir()
	dotfiles := filepath.Join(dir, "dotfiles", "npuchat.json")
	os.MkdirAll(filepath.Dir(dotfiles), 0o700)
	os.WriteFile(dotfiles, []byte(`{"threads": 2}`), 0o600)
	path := filepath.Join(dir, "config", "npuchat", "settings.json")
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.Symlink(filepath.Join("..", "..", "dotfiles", "npuchat.json"), path); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if err := UpdateSettings(path, Change{"engine", "cpu"}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the settings link was replaced: %v %v", st.Mode(), err)
	}
	if s, err := ReadSettings(dotfiles); err != nil || s.Engine != "cpu" || s.Threads != 2 {
		t.Fatalf("the linked file: %+v %v", s, err)
	}
	c := &Config{SettingsPath: path, Settings: Settings{Engine: "npu"}}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(path); st.Mode()&os.ModeSymlink == 0 {
		t.Fatal("Save replaced the settings link")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".settings.json.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
