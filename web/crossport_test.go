package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestPageRoutesAnswerOnlyThePage (issue 38, item 4): another loopback
// port is the same site to a browser, so the page's SameSite=Strict
// cookie went along with requests from http://127.0.0.1:9999, and
// text/plain POSTs from there (no CORS preflight) created chats and sent
// messages. The page's routes now answer only the page's own origin
// (Origin, and Sec-Fetch-Site where present) and JSON bodies; the
// OpenAI and Ollama routes stay open to local pages.
func TestPageRoutesAnswerOnlyThePage(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	ts := startServer(t, fake.Options{}, web.Options{History: h, Origins: []string{"https://tools.example"}}, service.Options{})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{"title": "mine"}`)
	id := decodeJSON[history.Conversation](t, body).ID
	messages := ts.URL + "/api/conversations/" + strconv.FormatInt(id, 10) + "/messages"
	own := ts.URL
	otherPort := "http://127.0.0.1:9999"
	chat := `{"model": "minicpm5:2b", "messages": [{"role": "user", "content": "hi"}]}`
	type pageCase struct {
		name, method, url, body string
		hdr                     []string
		status                  int
		code                    string
	}
	cases := []pageCase{
		{"own origin creates a chat", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", own, "Sec-Fetch-Site", "same-origin"}, 201, ""},
		{"another port's origin", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", otherPort, "Sec-Fetch-Site", "same-site"}, 403, "forbidden_origin"},
		{"another port's origin, no fetch metadata", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", otherPort}, 403, "forbidden_origin"},
		{"another port's origin sends a message", "POST", messages, `{"content": "hi"}`, []string{"Origin", otherPort}, 403, "forbidden_origin"},
		{"another port's origin reads the history", "GET", ts.URL + "/api/conversations", "", []string{"Origin", otherPort}, 403, "forbidden_origin"},
		{"another port's origin asks preflight", "OPTIONS", ts.URL + "/api/conversations", "", []string{"Origin", otherPort, "Access-Control-Request-Method", "PUT"}, 403, "forbidden_origin"},
		{"same host by another name", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", "http://localhost:" + portOf(t, ts.URL)}, 403, "forbidden_origin"},
		{"own host and port over https", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", "https://" + strings.TrimPrefix(ts.URL, "http://")}, 403, "forbidden_origin"},
		{"another port's origin switches the model off", "POST", ts.URL + "/api/model/stop", "", []string{"Origin", otherPort}, 403, "forbidden_origin"},
		{"another port's origin reads the status", "GET", ts.URL + "/api/status", "", []string{"Origin", otherPort}, 403, "forbidden_origin"},
		{"configured origin", "POST", ts.URL + "/api/conversations", `{}`, []string{"Origin", "https://tools.example", "Sec-Fetch-Site", "cross-site"}, 201, ""},
		// No Origin: a browser says where the request came from in
		// Sec-Fetch-Site; without either it is not a browser.
		{"same-site without origin", "POST", ts.URL + "/api/conversations", `{}`, []string{"Sec-Fetch-Site", "same-site"}, 403, "forbidden_origin"},
		{"cross-site without origin", "GET", ts.URL + "/api/conversations", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "forbidden_origin"},
		{"same-site GET without origin (an img tag)", "GET", ts.URL + "/api/conversations/" + strconv.FormatInt(id, 10) + "/export", "", []string{"Sec-Fetch-Site", "same-site"}, 403, "forbidden_origin"},
		{"typed into the address bar", "GET", ts.URL + "/api/conversations", "", []string{"Sec-Fetch-Site", "none"}, 200, ""},
		{"state change with site none", "POST", ts.URL + "/api/conversations", `{}`, []string{"Sec-Fetch-Site", "none"}, 403, "forbidden_origin"},
		{"same-origin without origin", "POST", ts.URL + "/api/conversations", `{}`, []string{"Sec-Fetch-Site", "same-origin"}, 201, ""},
		{"not a browser", "POST", ts.URL + "/api/conversations", `{}`, nil, 201, ""},
		// Bodies: JSON only (text/plain and forms need no preflight).
		{"text/plain chat", "POST", ts.URL + "/api/conversations", `{}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"text/plain message", "POST", messages, `{"content": "hi"}`, []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, "unsupported_media_type"},
		{"form settings", "PUT", ts.URL + "/api/settings", `engine=cpu`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"multipart title", "PATCH", ts.URL + "/api/conversations/" + strconv.FormatInt(id, 10), `{}`, []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"},
		{"a body without a type", "POST", ts.URL + "/api/conversations", `{}`, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"text/plain PDF", "POST", ts.URL + "/api/attachments/pdf", "%PDF-1.4", []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"JSON with a charset", "PATCH", ts.URL + "/api/conversations/" + strconv.FormatInt(id, 10), `{"title": "still mine"}`, []string{"Content-Type", "application/json; charset=utf-8"}, 200, ""},
		{"a bodiless state change needs no type", "DELETE", ts.URL + "/api/models/minicpm5:2b/install", "", nil, 404, "not_found"},
		// The compatible APIs stay open to local pages, as Ollama's do.
		{"API from another port", "POST", ts.URL + "/v1/chat/completions", chat, []string{"Origin", otherPort, "Sec-Fetch-Site", "same-site"}, 200, ""},
		{"Ollama API from another port", "GET", ts.URL + "/api/tags", "", []string{"Origin", otherPort, "Sec-Fetch-Site", "same-site"}, 200, ""},
	}
	// Every origin ("*") opens the API, not the page's routes.
	star := startServer(t, fake.Options{}, web.Options{History: h, Origins: []string{"*"}}, service.Options{})
	cases = append(cases,
		pageCase{"origins * and another port", "POST", star.URL + "/api/conversations", `{}`, []string{"Origin", otherPort, "Sec-Fetch-Site", "same-site"}, 403, "forbidden_origin"},
		pageCase{"origins * and the API", "GET", star.URL + "/v1/models", "", []string{"Origin", "https://anywhere.example", "Sec-Fetch-Site", "cross-site"}, 200, ""},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.method, c.url, c.body, c.hdr...)
			if resp.StatusCode != c.status || (c.code != "" && !strings.Contains(body, `"`+c.code+`"`)) {
				t.Fatalf("%s %s: %d %s; want %d %s", c.method, c.url, resp.StatusCode, body, c.status, c.code)
			}
		})
	}
	// The PDF route takes a PDF (its own type needs a preflight too).
	resp, body := do(t, "POST", ts.URL+"/api/attachments/pdf", "%PDF-1.4 broken", "Content-Type", "application/pdf")
	if resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode == http.StatusForbidden {
		t.Errorf("a PDF sent as application/pdf: %d %s", resp.StatusCode, body)
	}
	// What was refused changed nothing.
	_, list := do(t, "GET", ts.URL+"/api/conversations", "")
	if n := strings.Count(list, `"id":`); n != 5 {
		t.Errorf("%d chats after the refused requests, want 5 (the first, own origin, configured, same-origin, not a browser): %s", n, list)
	}
	if _, msgs := do(t, "GET", messages, ""); strings.Contains(msgs, `"hi"`) {
		t.Errorf("a refused message was stored: %s", msgs)
	}
}

// TestInstallNeedsTheSession (issue 38, item 4): starting an install (a
// multi-gigabyte download, then the model switched on) needed no cookie
// at all. Its routes now need the page's session, as the history does.
func TestInstallNeedsTheSession(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for _, method := range []string{"POST", "DELETE", "GET"} {
		resp, body := do(t, method, ts.URL+"/api/models/minicpm5:2b/install", "", "Cookie", "")
		if resp.StatusCode != 401 || !strings.Contains(body, "session_required") {
			t.Errorf("%s install without the session: %d %s", method, resp.StatusCode, body)
		}
		// With it, the request reaches the installer (this server has
		// none).
		if resp, body := do(t, method, ts.URL+"/api/models/minicpm5:2b/install", ""); resp.StatusCode != 404 || !strings.Contains(body, "without an installer") {
			t.Errorf("%s install with the session: %d %s", method, resp.StatusCode, body)
		}
	}
}

// TestTwoServersKeepTheirOwnSessions (issue 37 item 2, issue 38 item 4):
// a browser keeps cookies per host, not per port, so two NPU Chats on
// two ports that named their cookie alike replaced each other's session.
// The name carries the port.
func TestTwoServersKeepTheirOwnSessions(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	first := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	second := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	for _, s := range []string{first.URL + first.Web.OpenLink(0), second.URL + second.Web.OpenLink(0)} {
		resp, err := browser.Get(s)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, base := range []string{first.URL, second.URL} {
		req, _ := http.NewRequest("GET", base+"/api/conversations", nil)
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s after logging in to both: %d (the other server's login replaced this one's)", base, resp.StatusCode)
		}
		u, _ := http.NewRequest("GET", base, nil)
		name := web.SessionCookiePrefix + portOf(t, base)
		found := false
		for _, c := range jar.Cookies(u.URL) {
			found = found || c.Name == name
		}
		if !found {
			t.Errorf("no cookie named %s for %s: %v", name, base, jar.Cookies(u.URL))
		}
	}
}
