package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestLongContextMatchesLlamaCpp runs a 300-token prompt through the
// MiniCPM5-like model (F32) so that RoPE angles at larger positions and a
// longer KV cache are compared too, at every position, within f32Tol.
func TestLongContextMatchesLlamaCpp(t *testing.T) {
	w := model(t, testmodel.MiniCPM5Small(), 1)
	var p []int
	for i := 0; i < 300; i++ {
		p = append(p, (i*37+11)%(w.Vocab.Size()-3))
	}
	path := writeGGUF(t, w, testmodel.F32)
	ref := llamaCpp(t, path, p)
	got := engineRun(t, path, engine.LoadOptions{}, p, ref.Greedy)
	d := compareLogits(t, "engine vs llama.cpp, 300-token prompt", got, ref, f32Tol)
	compareGreedy(t, "engine vs llama.cpp, 300-token prompt", got, ref)
	t.Logf("max relative logit difference over %d positions: %.3g", len(p)+steps-1, d)
}

// TestVocabTokenizesInLlamaCpp checks the test vocabulary itself: llama.cpp
// (qwen2 pre-tokenizer, merges by rank) splits plain lowercase text the way
// a textbook byte-level BPE over testmodel's merges does, so tokenizer tests
// can use these files too.
func TestVocabTokenizesInLlamaCpp(t *testing.T) {
	w := model(t, testmodel.Qwen3Small(), 1)
	path := writeGGUF(t, w, testmodel.F32)
	for _, text := range []string{"hello world", "the quick brown fox jumps over the lazy dog", "a model that tests the npu"} {
		want := bpe(w.Vocab, text)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, testmodel.LlamaRef(t), "-model", path, "-text", text)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("llama.cpp: %v\n%s", err, stderr.String())
		}
		var r run
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if !equalInts(r.Tokens, want) {
			t.Errorf("%q: llama.cpp %v, BPE over the merges %v", text, r.Tokens, want)
		}
	}
}

// bpe tokenizes lowercase words separated by single spaces: each word
// (with its leading space, as the qwen2 pre-tokenizer keeps it) is split
// into GPT-2 byte symbols and merged lowest rank first.
func bpe(v *testmodel.Vocab, text string) []int {
	ids := map[string]int{}
	for i, tok := range v.Tokens {
		ids[tok] = i
	}
	rank := map[string]int{}
	for i, m := range v.Merges {
		rank[m] = i
	}
	var out []int
	for i, word := range strings.Split(text, " ") {
		if i > 0 {
			word = " " + word
		}
		var syms []string
		for _, c := range []byte(word) {
			if c == ' ' {
				syms = append(syms, "Ġ") // GPT-2's byte 0x20
			} else {
				syms = append(syms, string(rune(c)))
			}
		}
		for {
			best, at := -1, -1
			for j := 0; j+1 < len(syms); j++ {
				if r, ok := rank[syms[j]+" "+syms[j+1]]; ok && (best < 0 || r < best) {
					best, at = r, j
				}
			}
			if at < 0 {
				break
			}
			syms = append(syms[:at], append([]string{syms[at] + syms[at+1]}, syms[at+2:]...)...)
		}
		for _, s := range syms {
			out = append(out, ids[s])
		}
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
