package cpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// longChat is a system prompt and n turns of a user question and an
// answer, then a last question.
func longChat(n int) *backend.Request {
	req := &backend.Request{Messages: []backend.Message{{Role: "system", Content: "you answer in short words"}}, MaxTokens: 4}
	for i := range n {
		req.Messages = append(req.Messages,
			backend.Message{Role: "user", Content: fmt.Sprintf("question %d about the cat and the dog and the tree", i)},
			backend.Message{Role: "assistant", Content: fmt.Sprintf("answer %d is that the cat sat", i)})
	}
	req.Messages = append(req.Messages, backend.Message{Role: "user", Content: "and the last question is here"})
	return req
}

// TestLongChatLeavesOutOldestTurns: a chat longer than the context is
// answered without its oldest turns (never the system prompt, never the
// last message), says how many messages it left out, and answers exactly
// as the same chat without them does.
func TestLongChatLeavesOutOldestTurns(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], MaxContext: 160})
	req := longChat(12)
	all, err := b.tmpl.EncodeMessages(b.tok, b.tcfg, chatMessages(req.Messages), renderOpts(b, req))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) <= 160 {
		t.Fatalf("the test chat is %d tokens: it fits the context", len(all))
	}
	got, _, res, err := run(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.OmittedMessages == 0 || res.OmittedMessages%2 != 0 || res.PromptTokens+backend.AnswerRoom(req, 160) > 160 {
		t.Fatalf("left out %d messages, prompt %d tokens: want whole turns left out and the prompt within 160 with room for 4", res.OmittedMessages, res.PromptTokens)
	}
	short := &backend.Request{Messages: append(req.Messages[:1:1], req.Messages[1+res.OmittedMessages:]...), MaxTokens: 4}
	want, _, res2, err := run(t, load(t, Options{Path: b.opts.Path, MaxContext: 160}), short)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || res2.OmittedMessages != 0 || res2.PromptTokens != res.PromptTokens {
		t.Errorf("the long chat answered %q (%d tokens); the chat without its %d oldest messages %q (%d tokens, %d left out)",
			got, res.PromptTokens, res.OmittedMessages, want, res2.PromptTokens, res2.OmittedMessages)
	}
	t.Logf("%d of %d messages left out; prompt %d tokens", res.OmittedMessages, len(req.Messages), res.PromptTokens)

	// One turn on, the cut stays where it was: the prompt's prefix, and the
	// KV cache, still serve.
	next := &backend.Request{Messages: append(append([]backend.Message(nil), req.Messages...),
		backend.Message{Role: "assistant", Content: got}, backend.Message{Role: "user", Content: "one more"}), MaxTokens: 4}
	_, _, res3, err := run(t, b, next)
	if err != nil {
		t.Fatal(err)
	}
	if res3.OmittedMessages != res.OmittedMessages || res3.CachedTokens < res.PromptTokens-8 {
		t.Errorf("one turn on: %d left out (was %d), %d of %d prompt tokens from the cache", res3.OmittedMessages, res.OmittedMessages,
			res3.CachedTokens, res3.PromptTokens)
	}
}

// TestMessageLargerThanTheContext: a last message that alone does not fit
// is refused before any work, with the sizes in the error.
func TestMessageLargerThanTheContext(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], MaxContext: 64})
	req := longChat(3)
	req.Messages[len(req.Messages)-1].Content = strings.Repeat("words and more words ", 20)
	_, _, res, err := run(t, b, req)
	if !errors.Is(err, backend.ErrPromptTooLong) {
		t.Fatalf("err = %v, want ErrPromptTooLong", err)
	}
	for _, want := range []string{"the last message and the system prompt take", "tokens", "64 tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if res.PrefillDuration != 0 || b.kv.Stats().Bytes != 0 {
		t.Errorf("work was done before the refusal: prefill %v, %d bytes of KV", res.PrefillDuration, b.kv.Stats().Bytes)
	}
}

// TestPromptsShareTheCache: two chats with one long system prompt, in
// turn: each reuses the system prompt the other computed, and going back
// to the first reuses all of it.
func TestPromptsShareTheCache(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"]})
	sys := backend.Message{Role: "system", Content: strings.Repeat("you are a helpful model that answers about cats and dogs ", 6)}
	a := &backend.Request{Messages: []backend.Message{sys, {Role: "user", Content: "tell me about the cat"}}, MaxTokens: 3}
	c := &backend.Request{Messages: []backend.Message{sys, {Role: "user", Content: "and now the dog, please"}}, MaxTokens: 3}
	_, _, ra, err := run(t, b, a)
	if err != nil {
		t.Fatal(err)
	}
	_, _, rc, err := run(t, b, c)
	if err != nil {
		t.Fatal(err)
	}
	if rc.CachedTokens < 40 || rc.CachedTokens >= rc.PromptTokens {
		t.Errorf("the second chat took %d of %d prompt tokens from the cache, want the system prompt's", rc.CachedTokens, rc.PromptTokens)
	}
	_, _, ra2, err := run(t, b, a)
	if err != nil {
		t.Fatal(err)
	}
	if ra2.CachedTokens != ra.PromptTokens-1 {
		t.Errorf("back to the first chat: %d of %d prompt tokens from the cache, want all but the last", ra2.CachedTokens, ra2.PromptTokens)
	}
	if st := b.kv.Stats(); st.Sequences != 2 {
		t.Errorf("the cache keeps %d sequences, want the two chats (%+v)", st.Sequences, st)
	}
}

// TestCacheStats: the backend reports what its KV cache holds (for the
// status and /api/ps), without waiting for a generation.
func TestCacheStats(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"], KVDir: t.TempDir()})
	if st := b.CacheStats(); st.Sequences != 0 || st.Bytes != 0 || st.Budget <= 0 {
		t.Fatalf("empty cache: %+v", st)
	}
	_, _, res, err := run(t, b, diskChat())
	if err != nil {
		t.Fatal(err)
	}
	st := b.CacheStats()
	if st.Sequences != 1 || st.Tokens < res.PromptTokens || st.Bytes < b.model.KVBytes(st.Tokens) || st.Bytes > st.Budget {
		t.Errorf("after one chat: %+v (prompt %d tokens)", st, res.PromptTokens)
	}
	b.Unload(t.Context())
	if st := b.CacheStats(); st != (backend.CacheStats{}) {
		t.Errorf("after unloading: %+v", st)
	}
}

// TestRequestContextLength: a request's own context length (a chat's
// setting, Ollama's num_ctx) fits the chat into fewer tokens than the
// loaded context, answers as the loaded context of that size does, and
// one larger than the loaded context is clamped to it.
func TestRequestContextLength(t *testing.T) {
	path := models(t)["gguf"]
	b := load(t, Options{Path: path, MaxContext: 512})
	for _, c := range []struct {
		name     string
		ask      int
		want     int
		omitting bool
	}{
		{"smaller", 160, 160, true},
		{"loaded", 0, b.maxCtx, false},
		{"larger, clamped", 100000, b.maxCtx, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := longChat(7)
			req.ContextLength = c.ask
			got, _, res, err := run(t, b, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ContextLength != c.want || (res.OmittedMessages > 0) != c.omitting || res.PromptTokens+backend.AnswerRoom(req, c.want) > c.want {
				t.Fatalf("context %d, %d messages left out, prompt %d tokens: want context %d, leaving out: %v", res.ContextLength, res.OmittedMessages, res.PromptTokens, c.want, c.omitting)
			}
			if c.ask != 160 {
				return
			}
			req2 := longChat(7)
			want, _, res2, err := run(t, load(t, Options{Path: path, MaxContext: 160}), req2)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || res2.OmittedMessages != res.OmittedMessages || res2.PromptTokens != res.PromptTokens {
				t.Errorf("context 160 asked: %q (%d left out, %d tokens); loaded with 160: %q (%d, %d)", got, res.OmittedMessages, res.PromptTokens,
					want, res2.OmittedMessages, res2.PromptTokens)
			}
		})
	}
	req := longChat(1)
	req.Messages[len(req.Messages)-1].Content = strings.Repeat("words and more words ", 20)
	req.ContextLength = 64
	if _, _, _, err := run(t, b, req); !errors.Is(err, backend.ErrPromptTooLong) || !strings.Contains(err.Error(), "(64 tokens)") {
		t.Errorf("a message larger than the request's context: %v", err)
	}
}
