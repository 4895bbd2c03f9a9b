package conformance

import (
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestKVCacheMatchesLlamaCpp: answers computed from a KVCache are
// llama.cpp's, token for token, with the default cache type: on a miss,
// on a whole hit (the same prompt again), on a partial hit (a prompt
// sharing only the first tokens, copied from a kept sequence), and after
// the kept sequence was evicted to make room for another prompt.
func TestKVCacheMatchesLlamaCpp(t *testing.T) {
	w := model(t, testmodel.MiniCPM5Small(), 1)
	path := writeGGUF(t, w, testmodel.F32)
	p1 := prompt(w.Vocab)
	p2 := append(append([]int(nil), p1[:6]...), 7, 300, 41, 42, 43, 200, 11)
	var p3 []int
	for i := range 60 {
		p3 = append(p3, (i*53+17)%(w.Vocab.Size()-3))
	}
	ref1, ref2, ref3 := llamaCpp(t, path, p1), llamaCpp(t, path, p2), llamaCpp(t, path, p3)

	m, err := engine.Load(path, engine.LoadOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Room for one answered prompt of p1 or p2 beside p3's, not all three.
	c := m.NewKVCache(engine.KVCacheOptions{Budget: m.KVBytes(len(p3) + steps + len(p1) + steps + 16)})
	s := c.NewSession(0)
	for _, step := range []struct {
		name   string
		prompt []int
		ref    *run
		reused int
	}{
		{"miss", p1, ref1, 0},
		{"whole hit", p1, ref1, len(p1) - 1},
		{"partial hit", p2, ref2, 6},
		{"another prompt", p3, ref3, 0},
		{"after eviction", p1, ref1, 6}, // p2's copy of p1's first 6 tokens outlived p1
	} {
		t.Run(step.name, func(t *testing.T) {
			got, reused := cachedRun(t, s, step.prompt, step.ref.Greedy)
			if reused != step.reused {
				t.Errorf("resumed %d positions from the cache, want %d", reused, step.reused)
			}
			want := &run{Logits: step.ref.Logits[len(step.ref.Logits)-1:], Greedy: step.ref.Greedy, GreedyLogits: step.ref.GreedyLogits}
			d := compareLogits(t, step.name+": engine from the KV cache vs llama.cpp", got, want, f32Tol)
			compareGreedy(t, step.name+": engine from the KV cache vs llama.cpp", got, want)
			t.Logf("%d positions from the cache; max relative logit difference %.3g; kept %+v", reused, d, c.Stats())
		})
	}
}

// cachedRun is engineRun on a KVCache's session: the prompt resumed from
// the cache and the rest prefilled, then steps greedy tokens with teacher
// forcing; the run's Logits hold the last prompt position only. The
// sequence is kept in the cache after.
func cachedRun(t *testing.T, s *engine.Session, prompt, teacher []int) (*run, int) {
	t.Helper()
	reused, err := s.Resume("", prompt)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Prefill(prompt[reused:])
	if err != nil {
		t.Fatal(err)
	}
	last := append([]float32(nil), l...)
	r := &run{Logits: [][]float32{last}}
	for i := range steps {
		r.Greedy = append(r.Greedy, sample.Argmax(last))
		r.GreedyLogits = append(r.GreedyLogits, last)
		if i+1 == steps {
			break
		}
		l, err := s.Forward(teacher[i])
		if err != nil {
			t.Fatal(err)
		}
		last = append([]float32(nil), l...)
	}
	s.Keep()
	return r, reused
}
