package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/web"
)

// TestOllamaErrorShapeByPrefix: every answer under /api/, routed or not,
// is Ollama's {"error": "…"} (the Ollama client showed "[object Object]"
// for OpenAI's shape on a path NPU Chat did not serve); /v1/ stays
// OpenAI's, /v1/messages Anthropic's.
func TestOllamaErrorShapeByPrefix(t *testing.T) {
	ts := startServer(t, fake.Options{}, web.Options{}, service.Options{})
	for _, c := range []struct{ method, path, body, shape string }{
		{"POST", "/api/pull", `{"model":"x"}`, "ollama"},
		{"GET", "/api/nothing/here", "", "ollama"},
		{"POST", "/api/chat", `{"model":""}`, "ollama"},
		{"POST", "/api/show", `{}`, "ollama"},
		{"POST", "/v1/nothing", `{}`, "openai"},
		{"POST", "/v1/chat/completions", `{}`, "openai"},
		{"POST", "/v1/messages", `{}`, "anthropic"},
	} {
		resp, body := do(t, c.method, ts.URL+c.path, c.body)
		if resp.StatusCode < 400 {
			t.Errorf("%s %s: %d %s, want an error", c.method, c.path, resp.StatusCode, body)
			continue
		}
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("%s %s: %s is not JSON", c.method, c.path, body)
			continue
		}
		var msg string
		switch c.shape {
		case "ollama":
			if json.Unmarshal(e["error"], &msg) != nil || msg == "" {
				t.Errorf("%s %s: %s, want Ollama's {\"error\": \"…\"}", c.method, c.path, body)
			}
		case "openai":
			msg, _ = errorOf(t, body)
		case "anthropic":
			var inner struct{ Type, Message string }
			if string(e["type"]) != `"error"` || json.Unmarshal(e["error"], &inner) != nil || inner.Type == "" || inner.Message == "" {
				t.Errorf("%s %s: %s, want Anthropic's error", c.method, c.path, body)
			}
		}
	}
}

// TestServerTimeoutIsEachFormatsStatus: a deadline of the server's own
// is the same 504 in every format, in that format's shape (it was a 400
// on /v1/messages and a 504 elsewhere, through a made-up status 499).
func TestServerTimeoutIsEachFormatsStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
		code string // OpenAI code / Anthropic type
		text string
	}{
		{"deadline", fmt.Errorf("prefill: %w", context.DeadlineExceeded), 504, "timeout", "timed out"},
		{"cancelled", fmt.Errorf("decode: %w", context.Canceled), 503, "cancelled", "stopped before it finished"},
	} {
		ts := startServer(t, fake.Options{FailErr: c.err}, web.Options{}, service.Options{})
		msgs := `"messages":[{"role":"user","content":"hi"}]`
		for _, r := range []struct{ path, body, shape string }{
			{"/v1/chat/completions", `{"model":"minicpm5:2b",` + msgs + `}`, "openai"},
			{"/v1/completions", `{"model":"minicpm5:2b","prompt":"hi"}`, "openai"},
			{"/v1/responses", `{"model":"minicpm5:2b","input":"hi"}`, "openai"},
			{"/v1/messages", `{"model":"minicpm5:2b","max_tokens":5,` + msgs + `}`, "anthropic"},
			{"/api/chat", `{"model":"minicpm5:2b","stream":false,` + msgs + `}`, "ollama"},
			{"/api/generate", `{"model":"minicpm5:2b","prompt":"hi","stream":false}`, "ollama"},
		} {
			resp, body := do(t, "POST", ts.URL+r.path, r.body)
			if resp.StatusCode != c.want || !strings.Contains(body, c.text) {
				t.Errorf("%s %s: %d %s, want %d saying %q", c.name, r.path, resp.StatusCode, body, c.want, c.text)
			}
			switch r.shape {
			case "openai":
				if _, code := errorOf(t, body); code != c.code {
					t.Errorf("%s %s: code %q, want %q", c.name, r.path, code, c.code)
				}
			case "anthropic":
				want := map[int]string{504: "timeout_error", 503: "overloaded_error"}[c.want]
				if !strings.Contains(body, `"type":"`+want+`"`) {
					t.Errorf("%s %s: %s, want type %s", c.name, r.path, body, want)
				}
			case "ollama":
				if !strings.HasPrefix(body, `{"error":"`) {
					t.Errorf("%s %s: %s, want Ollama's shape", c.name, r.path, body)
				}
			}
		}
	}
}
