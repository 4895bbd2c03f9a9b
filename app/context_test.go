package app

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
)

// TestContextLengthSettingReachesTheEngine: the context_length setting,
// set on the page (PUT /api/settings), is the context the CPU engine
// loads the model with (app → service → cpu.Options.MaxContext → the
// engine's session), as the running model reports it (/api/status's
// info); a change takes effect at the next load, and a length past the
// model's own maximum (Qwen3Small: 4096) is clamped to it.
func TestContextLengthSettingReachesTheEngine(t *testing.T) {
	a := newApp(t, testEnv(t), Flags{Model: tinyModel(t), Name: "tiny", Engine: "cpu"})
	cookie := pageSession(t, a)
	call := func(method, path, body string) {
		t.Helper()
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		a.WebServer().Handler().ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	for _, c := range []struct{ setting, want int }{{1024, 1024}, {2048, 2048}, {1 << 16, 4096}, {512, 512}} {
		call("PUT", "/api/settings", fmt.Sprintf(`{"context_length": %d}`, c.setting))
		call("POST", "/api/model/start", `{}`)
		st := waitState(t, a, service.StateOn)
		if st.Info == nil || st.Info.ContextLength != c.want {
			t.Errorf("context_length %d: the loaded model's context is %+v, want %d", c.setting, st.Info, c.want)
		}
		if err := a.Manager().Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitState(t, a, service.StateOff)
	}
}
