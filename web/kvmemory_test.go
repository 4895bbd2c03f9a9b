package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestKVMemoryFullIs503 (issue 38, item 7): a backend short of KV memory
// held by the answers beside (backend.ErrKVMemoryFull) is 503 with
// Retry-After in every format, code kv_memory_full; mid-stream, the
// stream ends with that error, never a finish reason or [DONE] (a cut
// answer the client could take for complete).
func TestKVMemoryFullIs503(t *testing.T) {
	short := fmt.Errorf("position 120: %w", backend.ErrKVMemoryFull)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	t.Run("before the answer", func(t *testing.T) {
		ts := startServer(t, fake.Options{FailErr: short}, web.Options{}, service.Options{})
		for _, r := range []struct{ path, body, shape string }{
			{"/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, "openai"},
			{"/v1/completions", `{"model":"minicpm5:2b","prompt":"hi"}`, "openai"},
			{"/v1/messages", `{"model":"minicpm5:2b","max_tokens":5,` + msgs + `}`, "anthropic"},
			{"/api/chat", `{"model":"minicpm5:2b","stream":false,` + msgs + `}`, "ollama"},
		} {
			resp, body := do(t, "POST", ts.URL+r.path, r.body)
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "try again") {
				t.Errorf("%s: %d (Retry-After %q) %s; want 503 with Retry-After", r.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			switch r.shape {
			case "openai":
				if _, code := errorOf(t, body); code != "kv_memory_full" {
					t.Errorf("%s: code %q, want kv_memory_full", r.path, code)
				}
			case "anthropic":
				if !strings.Contains(body, `"type":"overloaded_error"`) {
					t.Errorf("%s: %s, want overloaded_error", r.path, body)
				}
			}
		}
	})
	t.Run("mid-stream", func(t *testing.T) {
		ts := startServer(t, fake.Options{FailErr: short, FailAfter: 3}, web.Options{}, service.Options{})
		long := `"messages":[{"role":"user","content":"tell me about the cats and the dogs and the trees"}]`
		resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,`+long+`}`)
		ev := readSSE(t, strings.NewReader(body))
		if resp.StatusCode != 200 || len(ev) < 2 || !strings.Contains(ev[len(ev)-1], `"code":"kv_memory_full"`) ||
			strings.Contains(body, "[DONE]") || strings.Contains(body, `"finish_reason":"length"`) || strings.Contains(body, `"finish_reason":"stop"`) {
			t.Errorf("a stream short of KV memory: %d %s; want its text, then the kv_memory_full error, no finish", resp.StatusCode, body)
		}
	})
}
