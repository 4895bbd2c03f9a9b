package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

func TestSettingsAPI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{"threads": 3, "engine": "auto"}`), 0o600)
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	store := web.NewSettingsStore(cfg)
	var applied []string
	store.Apply = func(_ context.Context, before, after web.PageSettings) error {
		applied = append(applied, before.Engine+"->"+after.Engine)
		return nil
	}
	s := startServer(t, fake.Options{}, web.Options{Settings: store, LogFile: filepath.Join(dir, "npuchat.log")}, service.Options{})
	_, body := do(t, "GET", s.URL+"/api/settings", "")
	if got := decodeJSON[web.PageSettings](t, body); got.Engine != "auto" || got.KeepAlive != "5m0s" {
		t.Fatalf("settings: %s", body)
	}
	resp, body := do(t, "PUT", s.URL+"/api/settings", `{"engine": "cpu", "keep_alive": "1h", "chat": {"temperature": 0.2, "max_tokens": 64}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	var file map[string]any
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &file)
	chat, _ := file["chat"].(map[string]any)
	if file["engine"] != "cpu" || file["keep_alive"] != "1h" || file["threads"] != 3.0 || chat["temperature"] != 0.2 || chat["max_tokens"] != 64.0 {
		t.Fatalf("settings file after the change: %s", b)
	}
	if len(applied) != 1 || applied[0] != "auto->cpu" {
		t.Fatalf("applied: %v", applied)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"engine": "gpu"}`, "engine must be auto, npu or cpu"},
		{`{"engine": "remote"}`, "needs a remote URL"},
		{`{"keep_alive": "soon"}`, "write a duration such as 5m"},
		{`{"chat": {"top_p": 3}}`, "top_p must be between 0 and 1"},
	} {
		resp, body := do(t, "PUT", s.URL+"/api/settings", bad.body)
		if resp.StatusCode != 400 || !strings.Contains(body, bad.want) {
			t.Errorf("%s: %d %s", bad.body, resp.StatusCode, body)
		}
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Errorf("a refused change touched the file: %s", b2)
	}

	// The log tail: the last lines, and a clear error for a bad count.
	os.WriteFile(filepath.Join(dir, "npuchat.log"), []byte("one\ntwo\nthree\n"), 0o600)
	_, body = do(t, "GET", s.URL+"/api/logs?lines=2", "")
	if got := decodeJSON[struct{ Lines []string }](t, body); strings.Join(got.Lines, ",") != "two,three" {
		t.Errorf("log tail: %s", body)
	}
	for _, bad := range []string{"-4", "10abc", "2.5", "0x10", "99999"} {
		resp, body := do(t, "GET", s.URL+"/api/logs?lines="+bad, "")
		if resp.StatusCode != 400 || !strings.Contains(body, "lines must be a number from 1 to 5000") {
			t.Errorf("line count %q: %d %s", bad, resp.StatusCode, body)
		}
	}
}
