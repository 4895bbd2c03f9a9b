package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/history"
	"github.com/npuchat/npuchat/service"
	"github.com/npuchat/npuchat/service/backend"
	"github.com/npuchat/npuchat/service/backend/fake"
	"github.com/npuchat/npuchat/service/backend/oaicompat"
	"github.com/npuchat/npuchat/web"
	"github.com/npuchat/npuchat/web/webtest"
)

// TestLongChatStaysAnswerable: a conversation longer than the context is
// answered on the page route without its oldest messages; the answer's
// stats say how many the model did not see, the page says so under the
// answer, and the history keeps every message.
func TestLongChatStaysAnswerable(t *testing.T) {
	url, _ := startChat(t, fake.Options{ContextLength: 120})
	api := url + "/api/conversations"
	_, body := do(t, "POST", api, `{"system_prompt": "Be brief."}`)
	conv := decodeJSON[history.Conversation](t, body)
	msgs := fmt.Sprintf("%s/%d/messages", api, conv.ID)
	var done history.Message
	for i := range 8 {
		evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": "question %d %s"}`, i, strings.Repeat("word ", 10)), nil)
		last := evs[len(evs)-1]
		if last.Name != "done" {
			t.Fatalf("turn %d ended with %s: %s", i, last.Name, last.Data)
		}
		done = decodeJSON[history.Message](t, string(last.Data))
	}
	if done.Stats == nil || done.Stats.OmittedMessages == 0 || done.Stats.OmittedMessages%2 != 0 {
		t.Fatalf("the last answer's stats %+v: want whole turns left out", done.Stats)
	}
	_, body = do(t, "GET", fmt.Sprintf("%s/%d", api, conv.ID), "")
	stored := decodeJSON[struct{ Messages []history.Message }](t, body).Messages
	if len(stored) != 16 {
		t.Errorf("the history holds %d messages, want all 16", len(stored))
	}
	resp, page := do(t, "GET", fmt.Sprintf("%s/c/%d", url, conv.ID), "")
	want := fmt.Sprintf("The model did not see the %d oldest messages", done.Stats.OmittedMessages)
	if resp.StatusCode != 200 || !strings.Contains(page, want) || !strings.Contains(page, `data-testid="omitted"`) {
		t.Errorf("the page (%d) does not say %q under the answer", resp.StatusCode, want)
	}

	// A message that alone does not fit: a clear error, nothing answered.
	evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": "%s"}`, strings.Repeat("word ", 130)), nil)
	last := evs[len(evs)-1]
	if last.Name != "error" || !strings.Contains(string(last.Data), "more than the context holds (120 tokens)") {
		t.Errorf("a message larger than the context: %s %s", last.Name, last.Data)
	}
}

// TestLongChatOverTheAPI: OpenAI and Ollama chats longer than the
// context are answered, with the messages left out in a field of each
// format's answer; OpenAI's usage has prompt_tokens_details.
func TestLongChatOverTheAPI(t *testing.T) {
	s := startServer(t, fake.Options{ContextLength: 60}, web.Options{}, service.Options{})
	var turns []string
	for i := range 6 {
		turns = append(turns, fmt.Sprintf(`{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d"}`, i, strings.Repeat("w ", 8), i))
	}
	chat := `[{"role":"system","content":"Be brief."},` + strings.Join(turns, ",") + `,{"role":"user","content":"last one"}]`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"model":"minicpm5:2b","messages":` + chat + `}`, "omitted_messages"},
		{"/v1/chat/completions", `{"model":"minicpm5:2b","stream":true,"messages":` + chat + `}`, "omitted_messages"},
		{"/api/chat", `{"model":"minicpm5:2b","stream":false,"messages":` + chat + `}`, "omitted_messages"},
	} {
		resp, body := do(t, "POST", s.URL+c.path, c.body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"`+c.field+`":`) || !strings.Contains(body, "last ") {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		if c.path == "/v1/chat/completions" && !strings.Contains(c.body, `"stream":true`) && !strings.Contains(body, `"prompt_tokens_details":{"cached_tokens":`) {
			t.Errorf("%s: no prompt_tokens_details in %s", c.path, body)
		}
	}
	resp, body := do(t, "POST", s.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"`+strings.Repeat("w ", 80)+`"}]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "context_length_exceeded") || !strings.Contains(body, "(60 tokens)") {
		t.Errorf("a message larger than the context: %d %s", resp.StatusCode, body)
	}
}

// TestDeletedChatForgetsItsCache: deleting a conversation drops what is
// kept for its answers' prompts (the tag its requests carry).
func TestDeletedChatForgetsItsCache(t *testing.T) {
	var forgot []string
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{ForgetCache: func(tag string) { forgot = append(forgot, tag) }})
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{}`)
	conv := decodeJSON[history.Conversation](t, body)
	if resp, _ := do(t, "DELETE", fmt.Sprintf("%s/%d", api, conv.ID), ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if want := fmt.Sprintf("chat-%d", conv.ID); len(forgot) != 1 || forgot[0] != want {
		t.Errorf("forgot %v, want [%s]", forgot, want)
	}
}

// TestOpenedChatWarmsItsCache: opening a conversation (GET, as the page
// does when a chat is chosen) asks the loaded backend to read its keys
// and values back (the tag its requests carry), so its next message
// does not wait for the disk.
func TestOpenedChatWarmsItsCache(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fake.Options{}, web.Options{History: h}, service.Options{})
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{}`)
	conv := decodeJSON[history.Conversation](t, body)
	stream(t, t.Context(), fmt.Sprintf("%s/%d/messages", api, conv.ID), `{"content": "hello"}`, func(sseEvent) bool { return true })
	if resp, _ := do(t, "GET", fmt.Sprintf("%s/%d", api, conv.ID), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	fakes := s.Fakes()
	if len(fakes) != 1 {
		t.Fatalf("%d backends loaded, want 1", len(fakes))
	}
	if want := fmt.Sprintf("chat-%d", conv.ID); fmt.Sprint(fakes[0].Warmed()) != "["+want+"]" {
		t.Errorf("warmed %v, want [%s]", fakes[0].Warmed(), want)
	}
}

// TestChatContextLength: a chat's own context length is a setting of the
// chat (PATCH, cleared by "clear"), fits its answers into that many
// tokens (the oldest messages left out, the answer's stats giving the
// context used), and one longer than the loaded model's context is
// clamped to it; a value out of range is refused naming the field.
func TestChatContextLength(t *testing.T) {
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := startServer(t, fake.Options{ContextLength: 4096}, web.Options{History: h}, service.Options{})
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{"system_prompt": "Be brief.", "context_length": 120}`)
	conv := decodeJSON[history.Conversation](t, body)
	if conv.ContextLength == nil || *conv.ContextLength != 120 {
		t.Fatalf("created with %s", body)
	}
	msgs := fmt.Sprintf("%s/%d/messages", api, conv.ID)
	send := func(content string) history.Message {
		t.Helper()
		evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": %q}`, content), nil)
		last := evs[len(evs)-1]
		if last.Name != "done" {
			t.Fatalf("ended with %s: %s", last.Name, last.Data)
		}
		return decodeJSON[history.Message](t, string(last.Data))
	}
	var done history.Message
	for i := range 8 {
		done = send(fmt.Sprintf("question %d %s", i, strings.Repeat("word ", 10)))
	}
	if done.Stats == nil || done.Stats.OmittedMessages == 0 || done.Stats.ContextLength != 120 {
		t.Fatalf("a chat of context 120 on a model of 4096: stats %+v", done.Stats)
	}
	if reqs := s.Fakes()[0].Requests(); reqs[len(reqs)-1].ContextLength != 120 {
		t.Errorf("the engine was asked for context %d", reqs[len(reqs)-1].ContextLength)
	}

	// longer than the loaded model's: clamped, every message seen
	resp, body := do(t, "PATCH", fmt.Sprintf("%s/%d", api, conv.ID), `{"context_length": 100000}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"context_length":100000`) {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, body)
	}
	if done = send("one more"); done.Stats.OmittedMessages != 0 || done.Stats.ContextLength != 4096 {
		t.Errorf("a chat of context 100000 on a model of 4096: stats %+v", done.Stats)
	}
	resp, body = do(t, "PATCH", fmt.Sprintf("%s/%d", api, conv.ID), `{"clear": ["context_length"]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"context_length":null`) {
		t.Errorf("clear: %d %s", resp.StatusCode, body)
	}
	for _, bad := range []string{`{"context_length": 10}`, `{"context_length": 2000000}`, `{"context_length": "big"}`} {
		resp, body := do(t, "PATCH", fmt.Sprintf("%s/%d", api, conv.ID), bad)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "context_length") {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// TestOllamaNumCtx: Ollama's options.num_ctx is the request's own
// context on /api/chat and /api/generate: a chat longer than it is
// answered without its oldest turns, a prompt longer than it refused
// with the sizes, one larger than the loaded context clamped to it.
func TestOllamaNumCtx(t *testing.T) {
	s := startServer(t, fake.Options{ContextLength: 4096}, web.Options{}, service.Options{})
	var turns []string
	for i := range 6 {
		turns = append(turns, fmt.Sprintf(`{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d"}`, i, strings.Repeat("w ", 8), i))
	}
	chat := `[{"role":"system","content":"Be brief."},` + strings.Join(turns, ",") + `,{"role":"user","content":"last one"}]`
	resp, body := do(t, "POST", s.URL+"/api/chat", `{"model":"minicpm5:2b","stream":false,"options":{"num_ctx":60},"messages":`+chat+`}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"omitted_messages":`) {
		t.Errorf("/api/chat with num_ctx 60: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", s.URL+"/api/chat", `{"model":"minicpm5:2b","stream":false,"options":{"num_ctx":60000},"messages":`+chat+`}`)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, `"omitted_messages":`) {
		t.Errorf("/api/chat with num_ctx 60000: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", s.URL+"/api/generate", `{"model":"minicpm5:2b","stream":false,"options":{"num_ctx":20},"prompt":"`+strings.Repeat("w ", 40)+`"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "(20 tokens)") {
		t.Errorf("/api/generate with a prompt past num_ctx 20: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", s.URL+"/api/generate", `{"model":"minicpm5:2b","stream":false,"options":{"num_ctx":20},"prompt":"a short one"}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/api/generate with num_ctx 20: %d %s", resp.StatusCode, body)
	}
	var got []int
	for _, r := range s.Fakes()[0].Requests() {
		got = append(got, r.ContextLength)
	}
	if fmt.Sprint(got) != "[60 60000 20 20]" {
		t.Errorf("the engine was asked for contexts %v", got)
	}
	for _, bad := range []string{`-1`, `1.5`, `"big"`, `2000000`} {
		resp, body := do(t, "POST", s.URL+"/api/generate", `{"model":"minicpm5:2b","stream":false,"options":{"num_ctx":`+bad+`},"prompt":"hi"}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "options.num_ctx") {
			t.Errorf("num_ctx %s: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// caching is a fake backend that keeps a KV cache (as the CPU engine
// does) and says what it holds.
type caching struct {
	*fake.Backend
	stats backend.CacheStats
}

func (c *caching) CacheStats() backend.CacheStats { return c.stats }

// TestCacheShownInStatusAndPs: what the serving backend's KV cache holds
// (prompts, tokens, bytes, on disk) is in /api/status and /api/ps, and
// an answer's prompt from the cache is OpenAI's
// usage.prompt_tokens_details.cached_tokens.
func TestCacheShownInStatusAndPs(t *testing.T) {
	want := backend.CacheStats{Sequences: 3, Tokens: 1980, Bytes: 170 << 20, Budget: 1 << 30, BytesPerToken: 86016, DiskFiles: 2, DiskBytes: 40 << 20}
	s := webtest.Start(t, webtest.Config{NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		return &caching{Backend: fake.New(fake.Options{Name: model, Kind: kind, Cached: 4}), stats: want}, nil
	}})
	sessions.Store(strings.TrimPrefix(s.URL, "http://"), s.Cookie)
	resp, body := do(t, "POST", s.URL+"/v1/chat/completions", `{"model":"minicpm5:2b","messages":[{"role":"user","content":"hello"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"prompt_tokens_details":{"cached_tokens":4}`) {
		t.Errorf("chat completion: %d %s", resp.StatusCode, body)
	}
	wantJSON := `"cache":{"sequences":3,"tokens":1980,"bytes":178257920,"budget":1073741824,"bytes_per_token":86016,"disk_files":2,"disk_bytes":41943040}`
	for _, path := range []string{"/api/ps", "/api/status"} {
		if _, body := do(t, "GET", s.URL+path, ""); !strings.Contains(body, wantJSON) {
			t.Errorf("%s does not say what the cache holds: %s", path, body)
		}
	}
}

// TestLongChatOnTheRemoteEngine: on the remote engine a chat longer than
// the context the server reports (vLLM's max_model_len) is sent without
// its oldest turns; the answer's stats and the page say so, as on the
// CPU engine, and the server got the system prompt and the last question.
func TestLongChatOnTheRemoteEngine(t *testing.T) {
	var mu sync.Mutex
	var sent []json.RawMessage
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"minicpm5:2b","object":"model","max_model_len":300}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		sent = append(sent, body.Messages)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"short answer"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":250,"completion_tokens":2}}`+"\n\ndata: [DONE]\n\n")
	})
	upstream := httptest.NewServer(mux)
	t.Cleanup(upstream.Close)
	h := history.NewHandle(filepath.Join(t.TempDir(), "history.db"), history.Options{})
	t.Cleanup(func() { h.Close() })
	s := webtest.Start(t, webtest.Config{Web: web.Options{History: h}, NewBackend: func(_ context.Context, model string, kind enginekind.Kind) (backend.Backend, error) {
		return oaicompat.New(oaicompat.Options{BaseURL: upstream.URL, Model: model})
	}})
	sessions.Store(strings.TrimPrefix(s.URL, "http://"), s.Cookie)
	api := s.URL + "/api/conversations"
	_, body := do(t, "POST", api, `{"system_prompt": "Be brief."}`)
	conv := decodeJSON[history.Conversation](t, body)
	msgs := fmt.Sprintf("%s/%d/messages", api, conv.ID)
	var done history.Message
	for i := range 8 {
		evs := stream(t, context.Background(), msgs, fmt.Sprintf(`{"content": "question %d %s"}`, i, strings.Repeat("about the cat ", 12)), nil)
		last := evs[len(evs)-1]
		if last.Name != "done" {
			t.Fatalf("turn %d ended with %s: %s", i, last.Name, last.Data)
		}
		done = decodeJSON[history.Message](t, string(last.Data))
	}
	if done.Stats == nil || done.Stats.OmittedMessages == 0 || done.Stats.ContextLength != 300 {
		t.Fatalf("the last answer's stats %+v: want messages left out of the context of 300 the server reports", done.Stats)
	}
	mu.Lock()
	last := string(sent[len(sent)-1])
	mu.Unlock()
	if !strings.HasPrefix(last, `[{"role":"system","content":"Be brief."}`) || !strings.Contains(last, "question 7") || strings.Contains(last, "question 0 ") {
		t.Errorf("the server got %s", last)
	}
	resp, page := do(t, "GET", fmt.Sprintf("%s/c/%d", s.URL, conv.ID), "")
	if want := fmt.Sprintf("The model did not see the %d oldest messages", done.Stats.OmittedMessages); resp.StatusCode != 200 || !strings.Contains(page, want) {
		t.Errorf("the page (%d) does not say %q", resp.StatusCode, want)
	}
}
