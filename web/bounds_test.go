package web_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestRoutesWithoutAQueueReadOnlyWhatTheyNeed: a title, a model name or
// the settings are small; a body far beyond that is refused with 413,
// by its Content-Length or, sent chunked, once the route's bound has
// arrived, not read whole (50 concurrent 8 MB titles took the server to
// 3.7 GB). A long model name is not echoed whole in the 404.
func TestRoutesWithoutAQueueReadOnlyWhatTheyNeed(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	settings := newTestSettings(&config.Config{SettingsPath: filepath.Join(t.TempDir(), "settings.json")})
	ts := startServer(t, fake.Options{}, web.Options{History: h, Settings: settings}, service.Options{})
	_, body := do(t, "POST", ts.URL+"/api/conversations", `{}`)
	c := decodeJSON[history.Conversation](t, body)
	big := `{"title": "` + strings.Repeat("t", 4<<20) + `", "model": "` + strings.Repeat("m", 4<<20) + `"}`
	routes := []struct{ method, path string }{
		{"POST", "/api/conversations"},
		{"PATCH", fmt.Sprintf("/api/conversations/%d", c.ID)},
		{"POST", "/api/model/start"},
		{"POST", "/api/show"},
		{"PUT", "/api/settings"},
	}
	for _, rt := range routes {
		for _, chunked := range []bool{false, true} {
			var rd io.Reader = strings.NewReader(big)
			if chunked {
				rd = io.MultiReader(rd) // no length known: sent chunked
			}
			req, _ := http.NewRequest(rt.method, ts.URL+rt.path, rd)
			req.Header.Set("Content-Type", "application/json")
			withSession(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// The server may close the connection while the client
				// still sends: that is a refusal too.
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%s %s (chunked %v) with an 8 MB body: %d %.200s", rt.method, rt.path, chunked, resp.StatusCode, b)
			}
		}
	}
	name := strings.Repeat("n", 3000)
	for _, path := range []string{"/api/show", "/api/model/start"} {
		resp, b := do(t, "POST", ts.URL+path, `{"model": "`+name+`"}`)
		if resp.StatusCode != 404 || len(b) > 600 {
			t.Errorf("%s with a 3000-byte unknown name: %d, %d bytes: %.300s", path, resp.StatusCode, len(b), b)
		}
	}
	resp, b := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model": "`+strings.Repeat("x", 1<<20)+`", "messages": [{"role": "user", "content": "hi"}]}`)
	if resp.StatusCode != 404 || len(b) > 600 {
		t.Errorf("a chat with a 1 MB unknown model name: %d, %d bytes", resp.StatusCode, len(b))
	}

	// Memory: 20 concurrent 8 MB titles allocate a few bounds' worth,
	// not 20 copies of 8 MB.
	title := strings.Repeat("t", 8<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Read in small pieces (no WriteTo): the client copies nothing.
			rd := struct{ io.Reader }{io.MultiReader(strings.NewReader(`{"title": "`), strings.NewReader(title), strings.NewReader(`"}`))}
			req, _ := http.NewRequest("POST", ts.URL+"/api/conversations", rd)
			req.Header.Set("Content-Type", "application/json")
			withSession(req)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("20 concurrent 8 MB titles allocated %d MB", got>>20)
	}
}
