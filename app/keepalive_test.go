package app

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
)

// TestKeepAliveNeverSetOnThePageKeepsTheModelLoaded: keep-alive set to
// "never" on the page (PUT /api/settings {"keep_alive": "-1"}) is the
// keep-alive of the model the page then switches on (POST
// /api/model/start): /api/status shows no unload time. Before settings
// had one owner the page's store kept the value to itself, the service
// armed its own five minutes at Start, and the model unloaded.
func TestKeepAliveNeverSetOnThePageKeepsTheModelLoaded(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	cookie := pageSession(t, a)
	call := func(method, path, body string) []byte {
		t.Helper()
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		a.WebServer().Handler().ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	call("PUT", "/api/settings", `{"keep_alive": "-1"}`)
	call("POST", "/api/model/start", `{}`)
	waitState(t, a, service.StateOn)
	var st map[string]any
	if err := json.Unmarshal(call("GET", "/api/status", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st["state"] != "on" {
		t.Fatalf("/api/status after the start: %v", st)
	}
	if exp, ok := st["expires_at"]; ok {
		t.Errorf("/api/status says the model unloads at %v; keep-alive is never", exp)
	}
	if got := a.Status().ExpiresAt; got != nil {
		t.Errorf("the service arms an idle unload at %v; keep-alive is never", got)
	}
}
