package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestSlowWholeAnswersAreDelivered: a whole (non-streamed) answer that
// takes several times the write timeout to generate (a long answer on
// a slow CPU) arrives complete on every generation endpoint: the write
// timeout bounds each write to a client, not the time to generate.
func TestSlowWholeAnswersAreDelivered(t *testing.T) {
	const pieces = 12 // "echo: " and the 11 words below
	ts := startServer(t, fake.Options{TokenDelay: 100 * time.Millisecond},
		web.Options{WriteTimeout: 250 * time.Millisecond, BodyTimeout: 250 * time.Millisecond}, service.Options{})
	words := strings.Repeat("w ", pieces-2) + "end"
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"` + words + `"}]}`},
		{"/v1/completions", `{"model":"minicpm5:2b","prompt":"` + words + `"}`},
		{"/api/chat", `{"model":"minicpm5:2b","stream":false,"messages":[{"role":"user","content":"` + words + `"}]}`},
		{"/api/generate", `{"model":"minicpm5:2b","stream":false,"prompt":"` + words + `"}`},
		{"/v1/messages", `{"model":"minicpm5:2b","max_tokens":100,"messages":[{"role":"user","content":"` + words + `"}]}`},
		{"/v1/responses", `{"model":"minicpm5:2b","input":"` + words + `"}`},
	} {
		start := time.Now()
		resp, body := do(t, "POST", ts.URL+c.path, c.body)
		took := time.Since(start)
		if resp.StatusCode != 200 || !strings.Contains(body, "echo: "+words) {
			t.Errorf("%s after %v: %d %.300s", c.path, took, resp.StatusCode, body)
		}
		if took < 4*250*time.Millisecond {
			t.Fatalf("%s took %v: the backend is not slow enough to test this", c.path, took)
		}
	}
}
