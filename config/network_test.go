package config

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSecretNeverShowsWhole: a token printed, logged or marshalled is
// masked; Reveal alone gives it.
func TestSecretNeverShowsWhole(t *testing.T) {
	const tok = "hf_abcdefghijklmnopqrstuvwxyz1234"
	s := Secret(tok)
	var log strings.Builder
	slog.New(slog.NewJSONHandler(&log, nil)).Info("x", "token", s, "settings", Settings{HFToken: s})
	js, _ := json.Marshal(struct{ T Secret }{s})
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", s), "%s": fmt.Sprintf("%s", s), "%#v": fmt.Sprintf("%#v", s), "%+v settings": fmt.Sprintf("%+v", Settings{HFToken: s}),
		"slog": log.String(), "json": string(js),
	} {
		if strings.Contains(out, "abcdefgh") {
			t.Errorf("%s shows the token: %s", name, out)
		}
	}
	if s.Reveal() != tok || s.Masked() != "hf_…1234" {
		t.Errorf("reveal %q, masked %q", s.Reveal(), s.Masked())
	}
	for in, want := range map[string]string{"": "", "abc": "…", "abcdefghij": "…ij"} {
		if got := Secret(in).Masked(); got != want {
			t.Errorf("Masked(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTokenFileIsUserOnly: a token set through the store goes into the
// token file beside the settings file, mode 0600, never into
// settings.json; Load reads it back; clearing it removes the file.
func TestTokenFileIsUserOnly(t *testing.T) {
	s, path := newStore(t, "{}\n", Settings{})
	const tok = "hf_secretsecretsecret9876"
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.HFToken = " " + tok + "\n"; return nil }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "secret") {
		t.Errorf("the token is in settings.json: %s", b)
	}
	fi, err := os.Stat(TokenPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	cfg, err := Load(MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": t.TempDir()}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Settings.HFToken.Reveal() != tok || cfg.HFToken != tok {
		t.Errorf("loaded token %q / %q", cfg.Settings.HFToken.Masked(), cfg.HFToken)
	}
	if _, err := s.Update(context.Background(), func(c *Settings) error { c.HFToken = ""; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(TokenPath(path)); !os.IsNotExist(err) {
		t.Errorf("a cleared token's file is still there: %v", err)
	}
}

// TestHubForPrecedence: the endpoint and token set in Settings win over
// the environment's, which win over the defaults.
func TestHubForPrecedence(t *testing.T) {
	dir := t.TempDir()
	hfHome := filepath.Join(dir, "hf")
	os.MkdirAll(hfHome, 0o700)
	os.WriteFile(filepath.Join(hfHome, "token"), []byte("hf_fromthefile\n"), 0o600)
	tests := []struct {
		name                string
		file                string
		env                 map[string]string
		endpoint, from, tok string
		tokFrom             string
	}{
		{"defaults", `{}`, nil, DefaultHFEndpoint, "default", "", ""},
		{"environment", `{}`, map[string]string{"HF_ENDPOINT": "https://mirror.example/", "HF_TOKEN": "hf_env"}, "https://mirror.example", "HF_ENDPOINT", "hf_env", "HF_TOKEN"},
		{"huggingface_hub's file", `{}`, map[string]string{"HF_HOME": hfHome}, DefaultHFEndpoint, "default", "hf_fromthefile", filepath.Join(hfHome, "token")},
		{"settings win", `{"hf_endpoint": "https://hf-mirror.com/"}`, map[string]string{"HF_ENDPOINT": "https://mirror.example", "HF_TOKEN": "hf_env"}, "https://hf-mirror.com", "settings", "hf_env", "HF_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			os.WriteFile(path, []byte(tt.file), 0o600)
			env := map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := Load(MapEnv(env), "linux")
			if err != nil {
				t.Fatal(err)
			}
			h := cfg.HubFor(cfg.Settings)
			if h.Endpoint != tt.endpoint || h.EndpointFrom != tt.from || h.Token.Reveal() != tt.tok || h.TokenFrom != tt.tokFrom || cfg.HFEndpoint != tt.endpoint || cfg.HFToken != tt.tok {
				t.Errorf("hub %+v (token %q), config %q", h, h.Token.Reveal(), cfg.HFEndpoint)
			}
			set := cfg.Settings
			set.HFToken = "hf_settingstoken"
			if h := cfg.HubFor(set); h.Token.Reveal() != "hf_settingstoken" || h.TokenFrom != "settings" {
				t.Errorf("a token set in Settings does not win: %+v", h)
			}
		})
	}
}

// TestNetworkSettingsRefused: each bad value is a FieldError naming its
// field, never quoting a token, and nothing is saved.
func TestNetworkSettingsRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, []byte("x"), 0o600)
	tests := []struct {
		name   string
		change func(*Settings)
		field  string
	}{
		{"endpoint without scheme", func(s *Settings) { s.HFEndpoint = "hf-mirror.com" }, "hf_endpoint"},
		{"endpoint ftp", func(s *Settings) { s.HFEndpoint = "ftp://hf-mirror.com" }, "hf_endpoint"},
		{"endpoint with a password", func(s *Settings) { s.HFEndpoint = "https://me:pw@hf-mirror.com" }, "hf_endpoint"},
		{"token with a space", func(s *Settings) { s.HFToken = "hf_abc def_secretpart" }, "hf_token"},
		{"relative models folder", func(s *Settings) { s.ModelsDir = "models" }, "models_dir"},
		{"models folder is a file", func(s *Settings) { s.ModelsDir = file }, "models_dir"},
		{"port out of range", func(s *Settings) { s.Addr = "127.0.0.1:70000" }, "port"},
		{"reachable without a key", func(s *Settings) { s.Addr = "0.0.0.0:8001" }, "api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := newStore(t, "{}\n", Settings{Addr: DefaultAddr})
			_, err := s.Update(context.Background(), func(c *Settings) error { tt.change(c); return nil })
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != tt.field {
				t.Fatalf("err %v, want a FieldError on %s", err, tt.field)
			}
			if strings.Contains(fe.Message, "secretpart") {
				t.Errorf("the message quotes the token: %s", fe.Message)
			}
			if b, _ := os.ReadFile(path); string(b) != "{}\n" {
				t.Errorf("a refused change was saved: %s", b)
			}
		})
	}
	s, _ := newStore(t, "{}\n", Settings{Addr: DefaultAddr})
	if _, err := s.Update(context.Background(), func(c *Settings) error {
		c.Addr, c.APIKey, c.HFEndpoint, c.ModelsDir = "0.0.0.0:9000", "k3y", "https://hf-mirror.com/", filepath.Dir(file)
		return nil
	}); err != nil {
		t.Errorf("good network settings refused: %v", err)
	}
	if got := s.Get(); got.HFEndpoint != "https://hf-mirror.com" {
		t.Errorf("endpoint kept its final slash: %q", got.HFEndpoint)
	}
}

func TestKeepAliveWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5 minutes", time.Hour: "1 hour", 90 * time.Minute: "1 hour 30 minutes",
		90 * time.Second: "1 minute 30 seconds", -1: "never (the model stays loaded)", 0: "at once", 48 * time.Hour: "2 days",
	} {
		if got := KeepAliveWords(d); got != want {
			t.Errorf("KeepAliveWords(%v) = %q, want %q", d, got, want)
		}
		if back, err := ParseKeepAlive(want); err != nil || back != d && !(d < 0 && back < 0) {
			t.Errorf("ParseKeepAlive(%q) = %v, %v; want %v", want, back, err, d)
		}
	}
}

func TestParseKeepAliveWordsRefused(t *testing.T) {
	for _, s := range []string{"5 parsecs", "minutes 5", "5", "five minutes", "-5 minutes", "1 hour 30"} {
		if s == "5" {
			continue // seconds, as Ollama reads it
		}
		if d, err := ParseKeepAlive(s); err == nil {
			t.Errorf("ParseKeepAlive(%q) = %v, want an error", s, d)
		}
	}
}
