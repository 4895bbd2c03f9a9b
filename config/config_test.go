package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadPathsPerOS(t *testing.T) {
	cases := []struct {
		name                     string
		goos                     string
		env                      map[string]string
		settings, data, logs, hf string
	}{
		{"linux defaults", "linux", map[string]string{"HOME": "/home/u"},
			"/home/u/.config/npuchat/settings.json", "/home/u/.local/share/npuchat", "/home/u/.local/share/npuchat/logs", "https://huggingface.co"},
		{"linux xdg", "linux", map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d", "HF_ENDPOINT": "https://mirror.example/"},
			"/c/npuchat/settings.json", "/d/npuchat", "/d/npuchat/logs", "https://mirror.example"},
		{"overrides", "linux", map[string]string{"HOME": "/home/u", "NPUCHAT_CONFIG": "/etc/n.json", "NPUCHAT_DATA": "/srv/n"},
			"/etc/n.json", "/srv/n", "/srv/n/logs", "https://huggingface.co"},
		{"windows", "windows", map[string]string{"USERPROFILE": `C:\Users\Ann`, "APPDATA": `C:\Users\Ann\AppData\Roaming`, "LOCALAPPDATA": `C:\Users\Ann\AppData\Local`},
			`C:\Users\Ann\AppData\Roaming\npuchat\settings.json`, `C:\Users\Ann\AppData\Local\npuchat`, `C:\Users\Ann\AppData\Local\npuchat\logs`, "https://huggingface.co"},
		{"windows without AppData variables", "windows", map[string]string{"USERPROFILE": `C:\Users\Ann`},
			`C:\Users\Ann\AppData\Roaming\npuchat\settings.json`, `C:\Users\Ann\AppData\Local\npuchat`, `C:\Users\Ann\AppData\Local\npuchat\logs`, "https://huggingface.co"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(MapEnv(c.env), c.goos)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SettingsPath != c.settings || cfg.DataDir != c.data || cfg.LogDir != c.logs || cfg.HFEndpoint != c.hf {
				t.Fatalf("got settings %s data %s logs %s hf %s", cfg.SettingsPath, cfg.DataDir, cfg.LogDir, cfg.HFEndpoint)
			}
			if d := LogDirOf(MapEnv(c.env), c.goos); d != c.logs {
				t.Fatalf("LogDirOf = %s, want %s as Load has it", d, c.logs)
			}
			if cfg.Addr != DefaultAddr || cfg.Model != DefaultModel || cfg.Engine != "auto" || cfg.KeepAliveDur != DefaultKeepAlive || cfg.QueueSize != DefaultQueueSize {
				t.Fatalf("defaults %+v", cfg)
			}
		})
	}
}

func TestSettingsFileAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{"addr":"127.0.0.1:9000","engine":"cpu","keep_alive":"10m","origins":["https://a.example"],"future_field":1}`), 0o600)
	env := map[string]string{"HOME": dir, "NPUCHAT_CONFIG": path}
	cfg, err := Load(MapEnv(env), "linux")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:9000" || cfg.Engine != "cpu" || cfg.KeepAliveDur != 10*time.Minute || len(cfg.Origins) != 1 {
		t.Fatalf("from the file: %+v", cfg.Settings)
	}
	env["NPUCHAT_ADDR"], env["NPUCHAT_ENGINE"], env["NPUCHAT_ORIGINS"], env["NPUCHAT_KEEP_ALIVE"] = "127.0.0.1:7000", "remote", "https://b.example, https://c.example", "-1"
	if cfg, err = Load(MapEnv(env), "linux"); err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:7000" || cfg.Engine != "remote" || len(cfg.Origins) != 3 || cfg.KeepAliveDur >= 0 {
		t.Fatalf("environment over the file: %+v %v", cfg.Settings, cfg.KeepAliveDur)
	}
	// Save and read back.
	cfg.Model = "other:1b"
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
	delete(env, "NPUCHAT_ENGINE")
	again, err := Load(MapEnv(env), "linux")
	if err != nil || again.Model != "other:1b" {
		t.Fatalf("after save: %+v %v", again, err)
	}
}

// TestSettingsFileWithByteOrderMark: a settings file saved by Notepad
// as "UTF-8 with BOM" is read; the invisible mark used to stop NPU Chat
// from starting with "invalid character 'ï'".
func TestSettingsFileWithByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte("\ufeff{\"engine\": \"cpu\"}\r\n"), 0o600)
	cfg, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_CONFIG": path}), "windows")
	if err != nil || cfg.Engine != "cpu" {
		t.Fatalf("Load: %v, %+v", err, cfg)
	}
	if s, err := ReadSettings(path); err != nil || s.Engine != "cpu" {
		t.Fatalf("ReadSettings: %v, %+v", err, s)
	}
}

func TestBadSettings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{"addr": `), 0o600)
	_, err := Load(MapEnv(map[string]string{"NPUCHAT_CONFIG": path}), "linux")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_ENGINE": "gpu"}), "linux"); err == nil || !strings.Contains(err.Error(), `"gpu"`) {
		t.Fatalf("bad engine: %v", err)
	}
	if _, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_KEEP_ALIVE": "soon"}), "linux"); err == nil {
		t.Fatal("bad keep-alive accepted")
	}
}

func TestHFToken(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hf"), 0o755)
	os.WriteFile(filepath.Join(dir, "hf", "token"), []byte("hf_file\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "tok"), []byte(" hf_path "), 0o600)
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_TOKEN": "hf_a", "HUGGING_FACE_HUB_TOKEN": "hf_b", "HF_HOME": filepath.Join(dir, "hf")}, "hf_a"},
		{map[string]string{"HUGGING_FACE_HUB_TOKEN": "hf_b", "HF_HOME": filepath.Join(dir, "hf")}, "hf_b"},
		{map[string]string{"HF_TOKEN_PATH": filepath.Join(dir, "tok"), "HF_HOME": filepath.Join(dir, "hf")}, "hf_path"},
		{map[string]string{"HF_HOME": filepath.Join(dir, "hf")}, "hf_file"},
		{map[string]string{"HOME": dir}, ""},
	}
	for _, c := range cases {
		cfg, err := Load(MapEnv(c.env), "linux")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HFToken != c.want {
			t.Errorf("%v: token %q, want %q", c.env, cfg.HFToken, c.want)
		}
	}
}

func TestParseKeepAlive(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", DefaultKeepAlive, true}, {"5m", 5 * time.Minute, true}, {"300", 300 * time.Second, true},
		{"0", 0, true}, {"-1", -time.Second, true}, {"1.5", 1500 * time.Millisecond, true},
		{"soon", 0, false}, {"5 minutes", 5 * time.Minute, true}, {"5 parsecs", 0, false}, {"1e3x", 0, false},
	}
	for _, c := range cases {
		got, err := ParseKeepAlive(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseKeepAlive(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8001": true, "localhost:1": true, "[::1]:8001": true, "127.1.2.3:80": true,
		// Issue 13, item 7: spellings the network stack reads as loopback.
		"LOCALHOST:8001": true, "LocalHost.:8001": true, "127.1:8001": true, "127.0.1:8001": true, "app.localhost:8001": true,
		"10.1:8001": false, "127.256:8001": true, "127.16777216:80": false,
		"0.0.0.0:8001": false, "[::]:8001": false, "192.168.1.5:8001": false, ":8001": false, "nonsense": false,
	} {
		if IsLoopback(addr) != want {
			t.Errorf("IsLoopback(%q) = %v", addr, !want)
		}
	}
}

func TestJoinOS(t *testing.T) {
	cases := []struct {
		goos string
		in   []string
		want string
	}{
		{"windows", []string{`C:\`, "flm"}, `C:\flm`},
		{"windows", []string{`C:\Users\Ann\`, `.flm\`, "models"}, `C:\Users\Ann\.flm\models`},
		{"windows", []string{`C:/Program Files/flm`, "model_list.json"}, `C:\Program Files\flm\model_list.json`},
		{"windows", []string{`\\server\share`, "x"}, `\\server\share\x`},
		{"linux", []string{"/home/u/", "a", "../b"}, "/home/u/b"},
	}
	for _, c := range cases {
		if got := JoinOS(c.goos, c.in...); got != c.want {
			t.Errorf("JoinOS(%s, %q) = %q, want %q", c.goos, c.in, got, c.want)
		}
	}
}

func TestWriteFileAtomicLeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.json")
	if err := WriteFileAtomic(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(filepath.Dir(path))
	if string(b) != "two" || len(entries) != 1 {
		t.Fatalf("content %q, %d files", b, len(entries))
	}
	// A folder in the way: an error, and the old content is untouched.
	if err := WriteFileAtomic(filepath.Join(path, "x"), []byte("three"), 0o600); err == nil {
		t.Fatal("writing under a file succeeded")
	}
}

func TestCanonicalAddrListens(t *testing.T) {
	for in, want := range map[string]string{
		"LOCALHOST:8001": "localhost:8001", "127.1:8001": "127.0.0.1:8001", "127.0.1:0": "127.0.0.1:0",
		"127.0.0.1:8001": "127.0.0.1:8001", "[::1]:8001": "[::1]:8001", "nonsense": "nonsense",
	} {
		if got := CanonicalAddr(in); got != want {
			t.Errorf("CanonicalAddr(%q) = %q, want %q", in, got, want)
		}
	}
	// The canonical shorthand really binds (Go's resolver would look
	// "127.1" up as a host name).
	for _, addr := range []string{"127.1:0", "LOCALHOST:0"} {
		ln, err := net.Listen("tcp", CanonicalAddr(addr))
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
}

// TestBlankAPIKeyIsRefused (issue 13, item 7): a key of spaces would
// lock every client out; say so instead.
func TestBlankAPIKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_API_KEY": "  "}), "linux"); err == nil || !strings.Contains(err.Error(), "blank") {
		t.Errorf("blank env key: %v", err)
	}
	path := filepath.Join(dir, "s.json")
	os.WriteFile(path, []byte(`{"api_key":" "}`), 0o600)
	if _, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_CONFIG": path}), "linux"); err == nil || !strings.Contains(err.Error(), "blank") {
		t.Errorf("blank settings key: %v", err)
	}
	os.WriteFile(path, []byte(`{"api_key":" k3y "}`), 0o600)
	if c, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_CONFIG": path}), "linux"); err != nil || c.APIKey != "k3y" {
		t.Errorf("padded key: %v %q", err, c.APIKey)
	}
}

// TestEmptySettingsFileIsNoSettings: a 0-byte (or blank) settings file,
// as a save cut short or a "touch" leaves, stopped start-up; it is read
// as no settings.
func TestEmptySettingsFileIsNoSettings(t *testing.T) {
	for _, content := range []string{"", "  \n", "\ufeff"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "settings.json")
		os.WriteFile(path, []byte(content), 0o600)
		cfg, err := Load(MapEnv(map[string]string{"HOME": dir, "NPUCHAT_CONFIG": path}), "linux")
		if err != nil || cfg.Engine != "auto" {
			t.Errorf("settings file %q: %v %+v", content, err, cfg)
		}
	}
}

// TestDamagedAddedModelsSaySoAtStart: a settings file whose added_models
// cannot work (edited by hand: two of one name, a path that is not
// whole, no name) is refused at start with the file and what to fix,
// not accepted and then met as an added_models error on every later
// change of an unrelated setting.
func TestDamagedAddedModelsSaySoAtStart(t *testing.T) {
	cases := []struct{ name, models, want string }{
		{"two of one name", `[{"name": "a", "path": "/m/a.gguf"}, {"name": "A", "path": "/m/b.gguf"}]`, `two added models are named "A"`},
		{"a relative path", `[{"name": "a", "path": "m/a.gguf"}]`, "no whole path"},
		{"no name", `[{"name": " ", "path": "/m/a.gguf"}]`, "has no name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			body := `{"added_models": ` + c.models + `}`
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(MapEnv(map[string]string{"NPUCHAT_CONFIG": path}), "linux")
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "added_models") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load: %v, want an error naming %s, added_models and %q", err, path, c.want)
			}
			if b, _ := os.ReadFile(path); string(b) != body {
				t.Errorf("the file was changed: %s", b)
			}
		})
	}
}
