package web_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	store := newTestSettings(cfg)
	s := startServer(t, fake.Options{}, web.Options{Settings: store, LogFile: filepath.Join(dir, "npuchat.log")}, service.Options{})
	_, body := do(t, "GET", s.URL+"/api/settings", "")
	if got := decodeJSON[web.PageSettings](t, body); got.Engine != "auto" || got.KeepAlive != "5m0s" || got.Speculative != "off" {
		t.Fatalf("settings: %s", body)
	}
	resp, body := do(t, "PUT", s.URL+"/api/settings", `{"engine": "cpu", "keep_alive": "1h", "context_length": 8192, "kv_cache_type": "q8_0", "speculative": "auto", "chat": {"temperature": 0.2, "max_tokens": 64}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	var file map[string]any
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &file)
	chat, _ := file["chat"].(map[string]any)
	if file["engine"] != "cpu" || file["keep_alive"] != "1h" || file["threads"] != 3.0 || file["context_length"] != 8192.0 || file["kv_cache_type"] != "q8_0" || file["speculative"] != "auto" || chat["temperature"] != 0.2 || chat["max_tokens"] != 64.0 {
		t.Fatalf("settings file after the change: %s", b)
	}
	if store.updates != 1 {
		t.Fatalf("%d updates for one PUT", store.updates)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"engine": "gpu"}`, "engine must be one of auto, npu, oflm, flm, cpu, remote"},
		{`{"engine": "remote"}`, "needs a remote server's URL"},
		{`{"keep_alive": "soon"}`, "write a duration such as 5m"},
		{`{"chat": {"top_p": 3}}`, "top-p must be between 0 and 1"},
		{`{"context_length": 100}`, "the context length must be 0 (automatic) or between 512"},
		{`{"kv_cache_type": "q4"}`, `"param":"kv_cache_type"`},
		{`{"speculative": "always"}`, `"param":"speculative"`},
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

// TestSettingsSaveWritesOnlyWhatThePageChanged: the page shows the
// effective settings (here the engine and keep-alive from environment
// variables) and sends them all back; only what was changed reaches
// the file, whose other keys, known or not, stay as they were. The
// file is replaced, not rewritten in place.
func TestSettingsSaveWritesOnlyWhatThePageChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	orig := `{"engine": "npu", "threads": 3, "future_option": {"x": [1, 2]}, "chat": {"temperature": 0.5, "future_chat": true}}`
	os.WriteFile(path, []byte(orig), 0o600)
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir, "NPUCHAT_ENGINE": "cpu", "NPUCHAT_KEEP_ALIVE": "10m"}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fake.Options{}, web.Options{Settings: newTestSettings(cfg)}, service.Options{})
	_, body := do(t, "GET", s.URL+"/api/settings", "")
	shown := decodeJSON[web.PageSettings](t, body)
	if shown.Engine != "cpu" || shown.KeepAlive != "10m" {
		t.Fatalf("the page is not shown the effective settings: %s", body)
	}
	before, _ := os.Stat(path)
	// What the page sends: everything it shows, max tokens changed.
	resp, body := do(t, "PUT", s.URL+"/api/settings", `{"engine": "cpu", "keep_alive": "10m", "chat": {"temperature": 0.5, "top_p": null, "max_tokens": 64}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	b, _ := os.ReadFile(path)
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	chat, _ := file["chat"].(map[string]any)
	if file["engine"] != "npu" || file["keep_alive"] != nil {
		t.Errorf("values from the environment were written into the file: %s", b)
	}
	if file["threads"] != 3.0 || fmt.Sprint(file["future_option"]) != "map[x:[1 2]]" || chat["future_chat"] != true {
		t.Errorf("keys the page does not know were dropped or changed: %s", b)
	}
	if chat["max_tokens"] != 64.0 || chat["temperature"] != 0.5 || chat["top_p"] != nil {
		t.Errorf("the change: %s", b)
	}
	after, _ := os.Stat(path)
	if os.SameFile(before, after) {
		t.Error("the settings file was rewritten in place, not replaced by a rename")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".settings.json.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Clearing a default removes it; the engine, changed, is written.
	do(t, "PUT", s.URL+"/api/settings", `{"engine": "auto", "chat": {"temperature": null, "max_tokens": 64}}`)
	b, _ = os.ReadFile(path)
	file = nil
	json.Unmarshal(b, &file)
	chat, _ = file["chat"].(map[string]any)
	if file["engine"] != "auto" || chat["temperature"] != nil || chat["future_chat"] != true || file["keep_alive"] != nil {
		t.Errorf("after the second change: %s", b)
	}
}

// TestSettingsSaveReadsAFileWithByteOrderMark: a settings file saved by
// Notepad as "UTF-8 with BOM" takes the page's changes (it was refused
// as "not a valid JSON object", for a mark no one can see).
func TestSettingsSaveReadsAFileWithByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte("\ufeff{\"threads\": 3}\r\n"), 0o600)
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": path, "HOME": dir}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fake.Options{}, web.Options{Settings: newTestSettings(cfg)}, service.Options{})
	if resp, body := do(t, "PUT", s.URL+"/api/settings", `{"engine": "cpu"}`); resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	got, err := config.ReadSettings(path)
	if err != nil || got.Engine != "cpu" || got.Threads != 3 {
		t.Fatalf("settings file after the change: %+v, %v", got, err)
	}
}

// TestPageKeepAliveAppliesToTheAPI: a keep-alive changed on the page is
// the idle time after every request that names none, from the page or
// any API; a request's own keep_alive still wins.
func TestPageKeepAliveAppliesToTheAPI(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load(config.MapEnv(map[string]string{"NPUCHAT_CONFIG": filepath.Join(dir, "settings.json"), "HOME": dir}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	store := newTestSettings(cfg)
	s := startServer(t, fake.Options{}, web.Options{Settings: store}, service.Options{})
	store.mgr = s.Manager
	if resp, body := do(t, "PUT", s.URL+"/api/settings", `{"keep_alive": "200ms"}`); resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/chat", `{"model":"minicpm5:2b","stream":false,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"minicpm5:2b","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		if resp, body := do(t, "POST", s.URL+c.path, c.body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		if st := s.Manager.Status(); st.State != service.StateOn {
			t.Fatalf("%s: the model is %s right after the answer", c.path, st.State)
		}
		waitUntil(t, c.path+"'s model to unload after the page's keep-alive of 200ms", func() bool { return s.Manager.Status().State != service.StateOn })
	}
	// The request's own keep_alive wins over the page's.
	// The idle timer is armed before the answer is written: with -1 none is.
	do(t, "POST", s.URL+"/api/chat", `{"model":"minicpm5:2b","stream":false,"keep_alive":-1,"messages":[{"role":"user","content":"hi"}]}`)
	if st := s.Manager.Status(); st.State != service.StateOn || st.ExpiresAt != nil {
		t.Fatalf("keep_alive -1 in the request: the model is %s, to unload at %v", st.State, st.ExpiresAt)
	}
}

// testSettings is the page's settings over a config.Store, putting the
// keep-alive into the service as the app does (app.UpdateSettings).
type testSettings struct {
	*config.Store
	mgr     *service.Manager
	updates int
}

func newTestSettings(cfg *config.Config) *testSettings {
	return &testSettings{Store: config.NewStore(cfg)}
}

func (s *testSettings) Update(ctx context.Context, change func(*config.Settings) error) (config.Settings, error) {
	out, err := s.Store.Update(ctx, change)
	if err == nil {
		s.updates++
		if s.mgr != nil {
			s.mgr.SetKeepAlive(out.KeepAliveDuration())
		}
	}
	return out, err
}
