package cpu

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/service/backend"
)

// TestEmbedTokensPerRequestAreCapped (issue 38, item 8): one embeddings
// request of 256 inputs of 3,900 tokens held a place of the engine for
// over 5 minutes. The inputs of a request together may take at most
// Options.MaxEmbedTokens; more is refused before anything is computed,
// with a 400-class error that says the limit and what to do.
func TestEmbedTokensPerRequestAreCapped(t *testing.T) {
	const limit = 40
	b := load(t, Options{Path: models(t)["gguf"], MaxEmbedTokens: limit})
	_, n, err := b.Embed(t.Context(), []string{"a cat"})
	if err != nil || n <= 0 || n > limit {
		t.Fatalf("one input: %d tokens, %v", n, err)
	}
	fit := limit / n
	inputs := make([]string, fit)
	for i := range inputs {
		inputs[i] = "a cat"
	}
	vecs, got, err := b.Embed(t.Context(), inputs)
	if err != nil || len(vecs) != fit || got != fit*n {
		t.Fatalf("%d inputs of %d tokens (limit %d): %d vectors, %d tokens, %v", fit, n, limit, len(vecs), got, err)
	}
	vecs, _, err = b.Embed(t.Context(), append(inputs, "a cat"))
	if !errors.Is(err, backend.ErrBadRequest) || vecs != nil {
		t.Fatalf("%d inputs of %d tokens (limit %d): %d vectors, %v; want a bad request", fit+1, n, limit, len(vecs), err)
	}
	for _, want := range []string{strconv.Itoa(limit), "several requests"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
