package web_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestPageRoutesNeedTheSession: with no API key (the default), another
// local account could read, export and delete the whole history and
// change the settings. Now the page's own routes need the session the
// tray's one-time link starts; the OpenAI and Ollama routes stay open on
// loopback.
func TestPageRoutesNeedTheSession(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	settings := newTestSettings(&config.Config{SettingsPath: filepath.Join(t.TempDir(), "settings.json")})
	ts := startServer(t, fake.Options{}, web.Options{History: h, Settings: settings, LogFile: filepath.Join(t.TempDir(), "npuchat.log")}, service.Options{})
	resp, body := do(t, "POST", ts.URL+"/api/conversations", `{"title": "private plans"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create with the session: %d %s", resp.StatusCode, body)
	}
	c := decodeJSON[history.Conversation](t, body)
	id := strconv.FormatInt(c.ID, 10)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/history", ""},
		{"GET", "/api/conversations", ""},
		{"GET", "/api/conversations?q=plans", ""},
		{"POST", "/api/conversations", `{}`},
		{"GET", "/api/conversations/" + id, ""},
		{"PATCH", "/api/conversations/" + id, `{"title": "mine now"}`},
		{"GET", "/api/conversations/" + id + "/export", ""},
		{"GET", "/api/conversations/" + id + "/messages", ""},
		{"POST", "/api/conversations/" + id + "/messages", `{"content": "hi"}`},
		{"DELETE", "/api/conversations/" + id, ""},
		{"GET", "/api/settings", ""},
		{"PUT", "/api/settings", `{"engine": "cpu"}`},
		{"GET", "/api/logs", ""},
	} {
		for name, cookie := range map[string]string{"none": "", "forged": web.SessionCookiePrefix + portOf(t, ts.URL) + "=forged"} {
			resp, body := do(t, tc.method, ts.URL+tc.path, tc.body, "Cookie", cookie)
			if resp.StatusCode != 401 || !strings.Contains(body, "session_required") || strings.Contains(body, "private plans") {
				t.Errorf("%s %s with cookie %s: %d %s", tc.method, tc.path, name, resp.StatusCode, body)
			}
			if resp.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%s %s: WWW-Authenticate with no API key set: the page would ask for a key there is none of", tc.method, tc.path)
			}
		}
	}
	for _, path := range []string{"/", "/c/" + id} {
		resp, page := do(t, "GET", ts.URL+path, "", "Cookie", "")
		if resp.StatusCode != 200 || strings.Contains(page, "private plans") {
			t.Errorf("%s without the session: %d, shows the history: %v", path, resp.StatusCode, strings.Contains(page, "private plans"))
		}
	}
	if _, page := do(t, "GET", ts.URL+"/c/"+id, ""); !strings.Contains(page, "private plans") {
		t.Error("the page with the session does not show the chat")
	}
	for _, path := range []string{"/v1/models", "/api/tags", "/api/status", "/api/version"} {
		if resp, body := do(t, "GET", ts.URL+path, "", "Cookie", ""); resp.StatusCode != 200 {
			t.Errorf("%s without a session: %d %s (the compatible APIs stay open on loopback)", path, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, "GET", ts.URL+"/api/conversations/"+id, ""); resp.StatusCode != 200 || !strings.Contains(body, "private plans") {
		t.Errorf("with the session: %d %s", resp.StatusCode, body)
	}
}

// TestOpenLinkWorksOnce: the link sets an HttpOnly, SameSite=Strict
// cookie for the whole server and goes on to the page; used again (or
// after its time) it sets nothing and the page is told why.
func TestOpenLinkWorksOnce(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sessions := web.NewSessions("", clock)
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h, Sessions: sessions}, service.Options{})
	link := ts.Web.OpenLink(web.LinkTTL)
	resp, err := noRedirect.Get(ts.URL + link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "npuchat_session_"+portOf(t, ts.URL) {
			got = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || got == nil {
		t.Fatalf("link: %d to %q, cookie %v", resp.StatusCode, resp.Header.Get("Location"), got)
	}
	if !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.Path != "/" || len(got.Value) < 40 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ and a long random value", got)
	}
	if r, _ := do(t, "GET", ts.URL+"/api/conversations", "", "Cookie", got.Name+"="+got.Value); r.StatusCode != 200 {
		t.Errorf("the link's session: %d", r.StatusCode)
	}
	again, err := noRedirect.Get(ts.URL + link)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if len(again.Cookies()) != 0 || again.Header.Get("Location") != "/?link=used" {
		t.Errorf("a used link: cookies %v, to %q", again.Cookies(), again.Header.Get("Location"))
	}
	late := ts.Web.OpenLink(web.LinkTTL)
	mu.Lock()
	now = now.Add(web.LinkTTL + time.Second)
	mu.Unlock()
	if r, err := noRedirect.Get(ts.URL + late); err != nil || len(r.Cookies()) != 0 {
		t.Errorf("an expired link set a session: %v %v", err, r.Cookies())
	}
	// A link never takes the browser elsewhere.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "/%09/evil.example", "/%0a/evil.example", "/%0d%0a/evil.example",
		"/%5Cevil.example", "/a\\b", "/%7F/evil.example", "javascript:alert(1)", "", "evil.example"} {
		r, err := noRedirect.Get(ts.URL + ts.Web.OpenLink(0) + "&next=" + next)
		if err != nil {
			t.Fatal(err)
		}
		if loc := r.Header.Get("Location"); loc != "/" {
			t.Errorf("next=%s went to %q", next, loc)
		}
	}
	// A path on this server is where the link goes on to.
	r, err := noRedirect.Get(ts.URL + ts.Web.OpenLink(0) + "&next=" + url.QueryEscape("/c/12?q=a"))
	if err != nil {
		t.Fatal(err)
	}
	if loc := r.Header.Get("Location"); loc != "/c/12?q=a" {
		t.Errorf("next=/c/12?q=a went to %q", loc)
	}
}

// portOf is the port of a test server's URL.
func portOf(t testing.TB, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Port() == "" {
		t.Fatalf("no port in %q", u)
	}
	return p.Port()
}

// TestPageRoutesWithAPIKey: with a key set, the key or the session lets
// a client in; without either the answer asks for the key.
func TestPageRoutesWithAPIKey(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h, APIKey: "sekrit"}, service.Options{})
	if r, body := do(t, "GET", ts.URL+"/api/conversations", "", "Cookie", "", "Authorization", "Bearer sekrit"); r.StatusCode != 200 {
		t.Errorf("with the key: %d %s", r.StatusCode, body)
	}
	if r, body := do(t, "GET", ts.URL+"/api/conversations", ""); r.StatusCode != 200 {
		t.Errorf("with the session: %d %s", r.StatusCode, body)
	}
	r, body := do(t, "GET", ts.URL+"/api/conversations", "", "Cookie", "", "Authorization", "Bearer wrong")
	if r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") == "" || !strings.Contains(body, "API key") {
		t.Errorf("with a wrong key: %d %q %s", r.StatusCode, r.Header.Get("WWW-Authenticate"), body)
	}
	// The session is for the page's routes only: the compatible APIs
	// keep wanting the key.
	if r, _ := do(t, "GET", ts.URL+"/v1/models", ""); r.StatusCode != 401 {
		t.Errorf("/v1/models with a session and no key: %d", r.StatusCode)
	}
}

// TestSessionsSurviveARestart: sessions are kept as hashes in a file
// only this user can read, so a browser stays in after NPU Chat restarts.
func TestSessionsSurviveARestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sessions.json")
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	first := webtest.Start(t, webtest.Config{Web: web.Options{History: h, Sessions: web.NewSessions(file, nil)}})
	cookie, err := webtest.Login(first.URL, first.Web.OpenLink(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, value, _ := strings.Cut(cookie, "=")
	if strings.Contains(string(b), value) {
		t.Error("the sessions file holds the cookie itself")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("sessions file mode %v; want 0600", fi.Mode())
	}
	second := webtest.Start(t, webtest.Config{Web: web.Options{History: h, Sessions: web.NewSessions(file, nil)}})
	// The same browser on the same port: the test's second server has
	// another port, so the cookie goes under that port's name.
	again := web.SessionCookiePrefix + portOf(t, second.URL) + "=" + value
	if r, body := do(t, "GET", second.URL+"/api/conversations", "", "Cookie", again); r.StatusCode != 200 {
		t.Errorf("after a restart: %d %s", r.StatusCode, body)
	}
}
