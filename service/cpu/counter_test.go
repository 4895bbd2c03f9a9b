package cpu

import (
	"testing"
)

// TestPromptCounter: the counter read from a model's folder gives the
// prompt length the engine itself renders for the same chat.
func TestPromptCounter(t *testing.T) {
	dir := models(t)["flm"]
	count, err := PromptCounter(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := load(t, Options{Path: dir})
	for _, n := range []int{0, 3, 9} {
		req := longChat(n)
		ids, err := b.Prompt(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := count(req.Messages)
		if err != nil || got != len(ids) {
			t.Errorf("%d turns: counted %d (%v), the engine renders %d tokens", n, got, err, len(ids))
		}
	}
	if _, err := PromptCounter(t.TempDir()); err == nil {
		t.Error("a folder without a tokenizer gave a counter")
	}
}
