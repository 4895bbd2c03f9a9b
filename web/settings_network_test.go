package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestSettingsNetworkAPI: the page sets the Hugging Face endpoint and
// token, the port and "reachable from other devices" with its API key;
// a GET shows the token and the key masked only, never whole; a PUT
// without them keeps them; a bad value is a 400 naming its field.
func TestSettingsNetworkAPI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(`{}`), 0o600)
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir, "HF_ENDPOINT": "https://env-mirror.example"}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fake.Options{}, web.Options{Settings: newTestSettings(cfg)}, service.Options{})
	_, body := do(t, "GET", s.URL+"/api/settings", "")
	got := decodeJSON[web.PageSettings](t, body)
	if got.Port != 8001 || got.Reachable || got.KeepAliveText != "5 minutes" || got.HFEndpoint != "" {
		t.Fatalf("settings: %s", body)
	}
	const tok, key = "hf_page0123456789abcdefWXYZ", "my-api-key-0123456789"
	resp, body := do(t, "PUT", s.URL+"/api/settings", `{"keep_alive": "1h", "hf_endpoint": "https://hf-mirror.com/", "hf_token": "`+tok+`", "port": 9000, "reachable": true, "api_key": "`+key+`"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, "GET", s.URL+"/api/settings", "")
	got = decodeJSON[web.PageSettings](t, body)
	if strings.Contains(body, "0123456789") {
		t.Errorf("a secret is sent whole: %s", body)
	}
	if got.HFTokenMasked != "hf_…WXYZ" || got.APIKeyMasked != "my-…6789" || got.HFEndpoint != "https://hf-mirror.com" || got.Port != 9000 || !got.Reachable || got.KeepAliveText != "1 hour" {
		t.Errorf("after the change: %s", body)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), tok) || !strings.Contains(string(b), `"addr": "0.0.0.0:9000"`) {
		t.Errorf("settings file: %s", b)
	}
	if tb, _ := os.ReadFile(config.TokenPath(path)); strings.TrimSpace(string(tb)) != tok {
		t.Errorf("token file: %q", tb)
	}
	// A save that leaves the secrets out keeps them.
	if resp, body := do(t, "PUT", s.URL+"/api/settings", `{"keep_alive": "2h"}`); resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	if tb, _ := os.ReadFile(config.TokenPath(path)); strings.TrimSpace(string(tb)) != tok {
		t.Errorf("a save without the token changed it: %q", tb)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"hf_endpoint": "mirror"}`, "hf_endpoint"},
		{`{"port": 0}`, "port"},
		{`{"reachable": true, "api_key": ""}`, "api_key"},
		{`{"models_dir": "relative/path"}`, "models_dir"},
	} {
		resp, body := do(t, "PUT", s.URL+"/api/settings", bad.body)
		if resp.StatusCode != 400 || !strings.Contains(body, `"param":"`+bad.param+`"`) {
			t.Errorf("%s: %d %s", bad.body, resp.StatusCode, body)
		}
	}
}
