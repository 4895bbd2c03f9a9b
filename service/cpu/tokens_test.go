package cpu

import (
	"context"
	"errors"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// TestGenerateTokensIsGenerate: a prompt given as ids (what `npuchat
// generate --prompt-tokens` sends) gets the answer Generate gives for the
// text those ids encode, and the observer sees every step.
func TestGenerateTokensIsGenerate(t *testing.T) {
	paths := models(t)
	b := load(t, Options{Path: paths["gguf"], Name: "test", Threads: 2})
	req := &backend.Request{Prompt: "hello there", MaxTokens: 6}
	text, ids, res, err := run(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := b.Prompt(req)
	if err != nil {
		t.Fatal(err)
	}
	b2 := load(t, Options{Path: paths["gguf"], Name: "test", Threads: 2}) // no cached prefix
	var rows int
	var seen []int
	var text2 []byte
	res2, err := b2.GenerateTokens(context.Background(), prompt, &backend.Request{MaxTokens: 6}, Observer{
		Logits: func(l []float32) error { rows++; return nil },
		Token:  func(id int) { seen = append(seen, id) },
	}, func(tok backend.Token) error { text2 = append(text2, tok.Text...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if string(text2) != text || res2.CompletionTokens != res.CompletionTokens || res2.FinishReason != res.FinishReason {
		t.Fatalf("GenerateTokens %q %+v; Generate %q %+v", text2, res2, text, res)
	}
	// Emitted ids are those whose text completed; the observer sees all.
	if len(seen) != res2.CompletionTokens || !isSubsequence(ids, seen) {
		t.Fatalf("observed tokens %v, emitted %v (%d generated)", seen, ids, res2.CompletionTokens)
	}
	// One row of logits per sampled token, plus the one that chose the end.
	if want := len(seen) + map[bool]int{true: 1}[res2.FinishReason == backend.FinishStop]; rows != want {
		t.Fatalf("%d logits rows for %d tokens (%s)", rows, len(seen), res2.FinishReason)
	}
}

func isSubsequence(sub, of []int) bool {
	for _, x := range of {
		if len(sub) > 0 && sub[0] == x {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

func TestGenerateTokensRefuses(t *testing.T) {
	paths := models(t)
	b := load(t, Options{Path: paths["gguf"], Name: "test", Threads: 2})
	cases := map[string][]int{"empty": nil, "outside the vocabulary": {1, 1 << 20}}
	for name, prompt := range cases {
		_, err := b.GenerateTokens(context.Background(), prompt, &backend.Request{MaxTokens: 2}, Observer{}, func(backend.Token) error { return nil })
		if !errors.Is(err, backend.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
	stop := errors.New("disk full")
	_, err := b.GenerateTokens(context.Background(), []int{1, 2}, &backend.Request{MaxTokens: 2},
		Observer{Logits: func([]float32) error { return stop }}, func(backend.Token) error { return nil })
	if !errors.Is(err, stop) {
		t.Errorf("an observer's error: %v", err)
	}
}
