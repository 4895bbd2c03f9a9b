package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/config"
)

// TestLogStartupError: the error that kept NPU Chat from starting goes
// to npuchat.log in the log folder the environment names, even when the
// settings file is what does not parse; a data folder that cannot hold
// the logs is an error that names it and says what to do.
func TestLogStartupError(t *testing.T) {
	startErr := errors.New("config: settings file is not valid JSON")
	tests := []struct {
		name    string
		setup   func(t *testing.T, home string) map[string]string // extra environment
		wantErr string                                            // "" = logged
	}{
		{"default folder, bad settings", func(t *testing.T, home string) map[string]string {
			p := filepath.Join(home, ".config", "npuchat", "settings.json")
			os.MkdirAll(filepath.Dir(p), 0o700)
			if err := os.WriteFile(p, []byte(`{"engine":`), 0o600); err != nil {
				t.Fatal(err)
			}
			return nil
		}, ""},
		{"NPUCHAT_DATA", func(t *testing.T, home string) map[string]string {
			return map[string]string{"NPUCHAT_DATA": filepath.Join(home, "elsewhere")}
		}, ""},
		{"data folder is a file", func(t *testing.T, home string) map[string]string {
			f := filepath.Join(home, "a-file")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return map[string]string{"NPUCHAT_DATA": f}
		}, "NPUCHAT_DATA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HOME": home}
			for k, v := range tt.setup(t, home) {
				env[k] = v
			}
			getenv := config.MapEnv(env)
			path, err := LogStartupError(Options{Getenv: getenv, GOOS: "linux", Version: "1.2.3"}, startErr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), config.LogDirOf(getenv, "linux")) {
					t.Fatalf("LogStartupError = %q, %v; want an error naming the folder and %s", path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(config.LogDirOf(getenv, "linux"), "npuchat.log"); path != want {
				t.Errorf("logged to %s, want %s", path, want)
			}
			b, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(b), "NPU Chat could not start") || !strings.Contains(string(b), startErr.Error()) || !strings.Contains(string(b), `"version":"1.2.3"`) {
				t.Errorf("log %s (%v):\n%s", path, err, b)
			}
		})
	}
}
