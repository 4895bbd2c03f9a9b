package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
)

// TestSettingChangesKeepTheFilesOtherKeys: a setting changed from the
// tray (engine, serve at start) changes that key of the settings file
// alone: keys this version does not know (written by a newer one, or by
// hand) keep their values; a file made invalid while the tray runs is
// refused, with an error naming it, and left as it was.
func TestSettingChangesKeepTheFilesOtherKeys(t *testing.T) {
	tests := []struct {
		name    string
		file    string // at start
		broken  string // written after the start, before the change ("" = none)
		change  func(a *App) error
		want    map[string]any // the file's keys after
		wantErr string
	}{
		{"engine, unknown keys",
			`{"threads": 2, "from_a_newer_version": {"mode": "fast", "list": [1, 2]}, "my_note": "keep"}`, "",
			func(a *App) error { return a.SetEngine(context.Background(), "cpu") },
			map[string]any{"threads": 2.0, "from_a_newer_version": map[string]any{"mode": "fast", "list": []any{1.0, 2.0}}, "my_note": "keep", "engine": "cpu"}, ""},
		{"serve at start, unknown chat key",
			`{"chat": {"temperature": 0.3, "min_p": 0.05}, "engine": "auto"}`, "",
			func(a *App) error { return a.SetServeAtStart(true) },
			map[string]any{"chat": map[string]any{"temperature": 0.3, "min_p": 0.05}, "engine": "auto", "serve_at_start": true}, ""},
		{"serve at start off", `{"serve_at_start": true, "extra": null}`, "",
			func(a *App) error { return a.SetServeAtStart(false) },
			map[string]any{"serve_at_start": false, "extra": nil}, ""},
		{"file broken while running", `{"engine": "auto"}`, `{"engine": "auto", "my_note": "half-typed`,
			func(a *App) error { return a.SetServeAtStart(true) }, nil, "not a valid JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv(t)
			path := filepath.Join(env["XDG_CONFIG_HOME"], "npuchat", "settings.json")
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			a := newApp(t, env, Flags{})
			if tt.broken != "" {
				if err := os.WriteFile(path, []byte(tt.broken), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := tt.change(a)
			b, _ := os.ReadFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Errorf("change = %v; want an error naming %s, %q", err, path, tt.wantErr)
				}
				if string(b) != tt.broken {
					t.Errorf("the invalid file was overwritten:\n%s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%v:\n%s", err, b)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("settings file after the change:\n%s\nwant the keys %v", b, tt.want)
			}
		})
	}
}

// pageSession opens a one-time link of a's server, as the tray's "Open
// the chat" does, and returns the session cookie it sets.
func pageSession(t *testing.T, a *App) *http.Cookie {
	t.Helper()
	open := httptest.NewRecorder()
	a.WebServer().Handler().ServeHTTP(open, httptest.NewRequest("GET", "http://127.0.0.1"+a.WebServer().OpenLink(0), nil))
	cookies := open.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("the link set %v", cookies)
	}
	return cookies[0]
}

// TestTrayEngineChangeShowsOnThePage: an engine chosen from the tray is
// the engine the chat page's settings show, and choosing the engine
// shown before (auto) on the page switches back to it, instead of being
// taken for "no change" while the tray's choice stays in effect.
func TestTrayEngineChangeShowsOnThePage(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{})
	cookie := pageSession(t, a)
	page := func(method, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, "http://127.0.0.1/api/settings", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		a.WebServer().Handler().ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("%s /api/settings: %d %s", method, rec.Code, rec.Body)
		}
		return out
	}
	if got := page("GET", "")["engine"]; got != "auto" {
		t.Fatalf("page engine at start %v", got)
	}
	if err := a.SetEngine(context.Background(), "cpu"); err != nil {
		t.Fatal(err)
	}
	if got := page("GET", "")["engine"]; got != "cpu" {
		t.Fatalf("page engine after the tray chose cpu: %v", got)
	}
	page("PUT", `{"engine": "auto"}`)
	if a.Engine() != "auto" {
		t.Fatalf("engine after the page chose auto: %q", a.Engine())
	}
	s, err := config.ReadSettings(a.Config().SettingsPath)
	if err != nil || s.Engine != "auto" {
		t.Fatalf("settings file: %+v, %v", s, err)
	}
}

// TestSwitchingToTheRemoteEngineListsItsModels: started with a remote
// server's URL but another engine, switching to the remote engine (page
// or tray) registers what that server serves, as starting on it does, so
// that clients can name those models.
func TestSwitchingToTheRemoteEngineListsItsModels(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object": "list", "data": [{"id": "big:70b", "object": "model"}]}`))
	}))
	defer up.Close()
	a := newApp(t, testEnv(t), Flags{RemoteURL: up.URL + "/v1", Engine: "cpu"})
	listed := func() bool {
		for _, d := range a.mgr.Models() {
			if d.Name == "big:70b" {
				return true
			}
		}
		return false
	}
	if listed() {
		t.Fatal("the remote server's models listed on the cpu engine")
	}
	if err := a.SetEngine(context.Background(), "remote"); err != nil {
		t.Fatal(err)
	}
	if !listed() {
		t.Fatalf("after switching to the remote engine, models %v", a.mgr.Models())
	}
}

// TestPageAndTraySeeOneSettingChangeAtOnce: the settings have one owner
// (the app's store). A change the tray makes is what the page's GET
// /api/settings answers and what every settings subscriber (the tray's
// settings window) gets; a change the page makes (PUT /api/settings) is
// what the tray reads and is told, and is in effect in the service.
func TestPageAndTraySeeOneSettingChangeAtOnce(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{})
	cookie := pageSession(t, a)
	page := func(method, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, "http://127.0.0.1/api/settings", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		a.WebServer().Handler().ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("%s /api/settings: %d %s", method, rec.Code, rec.Body)
		}
		return out
	}
	watch, stop := a.SubscribeSettings()
	defer stop()
	next := func(what string, ok func(config.Settings) bool) {
		t.Helper()
		for {
			select {
			case s := <-watch:
				if ok(s) {
					return
				}
			case <-time.After(60 * time.Second): // a failure bound
				t.Fatalf("the settings subscriber was not told %s within 60 s", what)
			}
		}
	}
	next("the settings now", func(s config.Settings) bool { return true })

	if err := a.SetEngine(context.Background(), "cpu"); err != nil { // the tray's Engine menu
		t.Fatal(err)
	}
	if got := page("GET", "")["engine"]; got != "cpu" {
		t.Errorf("the page shows engine %v after the tray chose cpu", got)
	}
	next("the tray's engine", func(s config.Settings) bool { return s.Engine == "cpu" })

	page("PUT", `{"keep_alive": "1h"}`) // the page's settings view
	if got := a.Settings().KeepAlive; got != "1h" {
		t.Errorf("the tray reads keep-alive %q after the page set 1h", got)
	}
	next("the page's keep-alive", func(s config.Settings) bool { return s.KeepAlive == "1h" })
	if got := a.mgr.KeepAlive(); got != time.Hour {
		t.Errorf("the service's keep-alive is %v after the page set 1h", got)
	}
	if got := a.Engine(); got != "cpu" {
		t.Errorf("the page's change of keep-alive changed the engine to %q", got)
	}
}
