package web_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestSettingsRefusalNamesEveryField: a Save with five bad values (the
// page's port among them) is one 400 naming all five in fields, each at
// its param with words for a person; nothing is saved.
func TestSettingsRefusalNamesEveryField(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{"engine": "auto"}`), 0o600)
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fake.Options{}, web.Options{Settings: newTestSettings(cfg)}, service.Options{})
	missing := filepath.Join(dir, "not-made")
	resp, body := do(t, "PUT", s.URL+"/api/settings", `{"keep_alive": "-3m", "context_length": 100, "port": 70000,
		"models_dir": "`+filepath.ToSlash(missing)+`", "chat": {"temperature": 5, "top_p": 2}}`)
	if resp.StatusCode != 400 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	got := decodeJSON[struct {
		Error  string
		Param  string
		Fields []struct{ Param, Message string }
	}](t, body)
	var params []string
	for _, f := range got.Fields {
		params = append(params, f.Param)
		if strings.Contains(f.Message, "_") {
			t.Errorf("%s: %q names a key, not the setting", f.Param, f.Message)
		}
	}
	want := []string{"port", "keep_alive", "context_length", "temperature", "top_p", "models_dir"}
	if !slices.Equal(params, want) || got.Param != "port" {
		t.Fatalf("fields %v (param %q), want %v: %s", params, got.Param, want, body)
	}
	if b, _ := os.ReadFile(path); string(b) != `{"engine": "auto"}` {
		t.Errorf("a refused Save touched the file: %s", b)
	}
}
