package oaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// longChat is a system prompt, n turns and a last question.
func longChat(n int) *backend.Request {
	req := &backend.Request{Messages: []backend.Message{{Role: "system", Content: "Be brief."}}, MaxTokens: 8}
	for i := range n {
		req.Messages = append(req.Messages,
			backend.Message{Role: "user", Content: fmt.Sprintf("question %d %s", i, strings.Repeat("about the cat ", 10))},
			backend.Message{Role: "assistant", Content: fmt.Sprintf("answer %d", i)})
	}
	req.Messages = append(req.Messages, backend.Message{Role: "user", Content: "the last one"})
	return req
}

// sentMessages are the messages of the request a fake server got last.
func sentMessages(t *testing.T, srv *fakeServer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range srv.lastBody()["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// words counts a chat as one token a word and four a message: the fake
// servers' own count.
func words(msgs []backend.Message) (int, error) {
	n := 0
	for _, m := range msgs {
		n += len(strings.Fields(m.Content)) + 4
	}
	return n, nil
}

// TestFitsTheReportedContext: a chat longer than the context the server
// reports (vLLM's max_model_len) is sent without its oldest turns, the
// system prompt and the last question kept, and the result says how many
// were left out and the context; one that fits goes whole.
func TestFitsTheReportedContext(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "vllm_chat.sse"))
	srv.entry = map[string]any{"max_model_len": 200}
	c := loaded(t, srv, Options{})
	if got := c.Info().ContextLength; got != 200 {
		t.Fatalf("the context reported: %d, want 200", got)
	}
	_, _, res, err := collect(c, context.Background(), longChat(12))
	if err != nil {
		t.Fatal(err)
	}
	sent := sentMessages(t, srv)
	if res.OmittedMessages == 0 || res.OmittedMessages%2 != 0 || len(sent) != 2+12*2-res.OmittedMessages || res.ContextLength != 200 {
		t.Fatalf("left out %d, sent %d messages, context %d", res.OmittedMessages, len(sent), res.ContextLength)
	}
	if sent[0]["content"] != "Be brief." || sent[len(sent)-1]["content"] != "the last one" {
		t.Errorf("sent %v: want the system prompt first and the last question last", sent)
	}
	_, _, res, err = collect(c, context.Background(), longChat(1))
	if err != nil || res.OmittedMessages != 0 || len(sentMessages(t, srv)) != 4 {
		t.Errorf("a short chat: %v, %d left out, %d sent", err, res.OmittedMessages, len(sentMessages(t, srv)))
	}

	// Counted by an estimate, a last message is refused only when it
	// cannot fit at any count; else it goes with the system prompt alone,
	// and the server judges.
	maybe := longChat(3)
	maybe.Messages[len(maybe.Messages)-1].Content = strings.Repeat("x", 1000)
	if _, _, res, err = collect(c, context.Background(), maybe); err != nil || res.OmittedMessages != 6 || len(sentMessages(t, srv)) != 2 {
		t.Errorf("a last message that may fit: %v, %d left out, %d sent", err, res.OmittedMessages, len(sentMessages(t, srv)))
	}
	before := len(srv.bodies)
	maybe.Messages[len(maybe.Messages)-1].Content = strings.Repeat("x", 2000)
	_, _, _, err = collect(c, context.Background(), maybe)
	if !errors.Is(err, backend.ErrPromptTooLong) || !strings.Contains(err.Error(), "at least 251 tokens (2009 bytes), more than the context holds (200 tokens)") || len(srv.bodies) != before {
		t.Errorf("a last message that cannot fit: %v (%d requests sent)", err, len(srv.bodies)-before)
	}
}

// TestFitsWithTheModelsTokenizer: with a Counter (the FLM backend's), the
// fit counts with it; a request's own context smaller than the server's
// fits into that and bounds the answer (max_tokens); a last message that
// alone does not fit is refused with the sizes before anything is sent.
func TestFitsWithTheModelsTokenizer(t *testing.T) {
	srv := newFakeServer(t, serveFile(t, "flm_chat.sse"))
	c := loaded(t, srv, Options{ContextLength: 512, Count: words})
	req := longChat(12)
	req.ContextLength, req.MaxTokens = 100, 0
	_, _, res, err := collect(c, context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var kept []backend.Message
	for _, m := range sentMessages(t, srv) {
		kept = append(kept, backend.Message{Role: m["role"].(string), Content: m["content"].(string)})
	}
	n, _ := words(kept)
	if res.OmittedMessages == 0 || res.ContextLength != 100 || n+backend.AnswerRoom(req, 100) > 100 {
		t.Fatalf("context %d, %d left out, %d tokens sent", res.ContextLength, res.OmittedMessages, n)
	}
	if mt, _ := srv.lastBody()["max_tokens"].(float64); int(mt) != 100-n {
		t.Errorf("max_tokens %v, want the room left in the chat's context (%d)", srv.lastBody()["max_tokens"], 100-n)
	}

	// a server that says no context: the request's own still fits and
	// bounds the answer
	quiet := loaded(t, srv, Options{Count: words})
	if _, _, res, err = collect(quiet, context.Background(), req); err != nil || res.OmittedMessages == 0 || res.ContextLength != 100 {
		t.Fatalf("no server context, the request's 100: %v, %d left out, context %d", err, res.OmittedMessages, res.ContextLength)
	}
	if mt, _ := srv.lastBody()["max_tokens"].(float64); int(mt) != 100-n {
		t.Errorf("no server context: max_tokens %v, want %d", srv.lastBody()["max_tokens"], 100-n)
	}

	before := len(srv.bodies)
	big := &backend.Request{Messages: []backend.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: strings.Repeat("word ", 600)}}}
	_, _, _, err = collect(c, context.Background(), big)
	if !errors.Is(err, backend.ErrPromptTooLong) || !strings.Contains(err.Error(), "more than the context holds (512 tokens)") || !strings.Contains(err.Error(), "610 tokens") {
		t.Errorf("a message larger than the context: %v", err)
	}
	if len(srv.bodies) != before {
		t.Error("a message larger than the context was sent")
	}
}

// TestOverflowInTheSameWords: a server's "the prompt does not fit" comes
// back in the words of the CPU engine's, with the sizes counted here and
// what the server said; it is still ErrPromptTooLong and an *Error.
func TestOverflowInTheSameWords(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
		ctx              int
	}{
		{"vLLM, context known", `{"object":"error","message":"This model's maximum context length is 100 tokens. However, you requested 180 tokens.","code":400}`,
			"more than the context holds (100 tokens): shorten it, or raise the context length", 100},
		{"llama.cpp, no context reported", `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`,
			"more than the server's context holds: shorten it, or raise the context length", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newFakeServer(t, jsonStatus(http.StatusBadRequest, c.body)(t))
			cl := loaded(t, srv, Options{ContextLength: c.ctx})
			_, _, _, err := collect(cl, context.Background(), chat("hello there"))
			var ue *Error
			if !errors.Is(err, backend.ErrPromptTooLong) || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "the server said") {
				t.Errorf("got %v", err)
			}
			if strings.Contains(err.Error(), srv.URL) {
				t.Errorf("the words name the endpoint: %v", err)
			}
		})
	}
}

// TestLlamaServerProps: the llama.cpp server's context is read from GET
// /props (its slot's n_ctx) when its model list says none.
func TestLlamaServerProps(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"minicpm5","object":"model","meta":{"n_ctx_train":32768}}]}`))
	})
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"default_generation_settings": map[string]any{"n_ctx": 2048}, "total_slots": 1})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Options{BaseURL: srv.URL, Model: "minicpm5"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := c.Info().ContextLength; got != 2048 {
		t.Errorf("context %d, want the slot's 2048", got)
	}
}
