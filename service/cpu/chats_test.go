package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// TestFourChatsTwice: four chats visited in turn, then each again with
// its answer and a new message (issue 22's "four chats twice"): the
// second round computes at most the new messages (the answer as the
// history stores it, the new question and the template's tokens around
// them), counted in tokens: everything the first visit's prompt held
// comes from the KV cache, though three other chats ran in between.
func TestFourChatsTwice(t *testing.T) {
	b := load(t, Options{Path: models(t)["gguf"]})
	chats := make([]*backend.Request, 4)
	first := make([]backend.Result, 4)
	for i := range chats {
		chats[i] = &backend.Request{MaxTokens: 6, Messages: []backend.Message{
			{Role: "system", Content: strings.Repeat(fmt.Sprintf("chat %d is about the cat number %d and the tree ", i, i), 8)},
			{Role: "user", Content: fmt.Sprintf("what did cat %d do on the tree?", i)}}}
	}
	for i, req := range chats {
		answer, _, res, err := run(t, b, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.CachedTokens > 16 {
			t.Errorf("chat %d's first visit took %d tokens from the cache, want at most the template's opening (the chats differ after \"chat \")", i, res.CachedTokens)
		}
		first[i] = res
		req.Messages = append(req.Messages, backend.Message{Role: "assistant", Content: answer},
			backend.Message{Role: "user", Content: fmt.Sprintf("and then cat %d jumped down?", i)})
	}
	for i, req := range chats {
		_, _, res, err := run(t, b, req)
		if err != nil {
			t.Fatal(err)
		}
		newMessages := res.PromptTokens - first[i].PromptTokens
		prefilled := res.PromptTokens - res.CachedTokens
		if prefilled > newMessages || res.CachedTokens < first[i].PromptTokens {
			t.Errorf("chat %d's second visit prefilled %d of %d prompt tokens (%d from the cache), want at most the new messages' %d",
				i, prefilled, res.PromptTokens, res.CachedTokens, newMessages)
		}
	}
	if st := b.kv.Stats(); st.Sequences != 4 {
		t.Errorf("the cache keeps %d sequences, want the four chats (%+v)", st.Sequences, st)
	}
}
