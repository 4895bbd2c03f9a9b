package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// allowSet is a Constraint over a fixed set of tokens.
type allowSet struct {
	ok    map[int]bool
	masks int
}

func (a *allowSet) Allows(id int) bool { return a.ok[id] }
func (a *allowSet) Mask(m []uint64) {
	a.masks++
	clear(m)
	for id := range a.ok {
		m[id/64] |= 1 << (id % 64)
	}
}

func TestConstrainedGreedy(t *testing.T) {
	logits := make([]float32, 200)
	for i := range logits {
		logits[i] = float32(i % 17)
	}
	// 16, 33, 50... are the best; only 3 and 150 are allowed: 150 (logit 14) wins.
	c := &allowSet{ok: map[int]bool{3: true, 150: true}}
	got, err := New(Params{}).SampleConstrained(logits, nil, c)
	if err != nil || got != 150 {
		t.Errorf("got %d, %v; want 150", got, err)
	}
	// When the argmax is allowed, no mask is computed.
	c = &allowSet{ok: map[int]bool{16: true, 3: true}}
	if got, _ := New(Params{}).SampleConstrained(logits, nil, c); got != 16 || c.masks != 0 {
		t.Errorf("got %d with %d masks; want 16 with none", got, c.masks)
	}
	if _, err := New(Params{}).SampleConstrained(logits, nil, &allowSet{ok: map[int]bool{}}); !errors.Is(err, ErrNoToken) {
		t.Errorf("nothing allowed: err = %v", err)
	}
}

// Masked draws follow the model's probabilities renormalised over the
// allowed tokens, and never leave them.
func TestConstrainedDistribution(t *testing.T) {
	logits := []float32{3, 0, 1, 2, 0.5}
	c := &allowSet{ok: map[int]bool{1: true, 2: true, 4: true}}
	s := New(Params{Temperature: 1, Seed: 7, HasSeed: true})
	const n = 60000
	cnt := make([]int, len(logits))
	for i := 0; i < n; i++ {
		id, err := s.SampleConstrained(logits, nil, c)
		if err != nil {
			t.Fatal(err)
		}
		cnt[id]++
	}
	z := math.Exp(0) + math.Exp(1) + math.Exp(0.5)
	for id, k := range cnt {
		want := 0.0
		if c.ok[id] {
			want = math.Exp(float64(logits[id])) / z
		}
		if got := float64(k) / n; math.Abs(got-want) > 0.01 {
			t.Errorf("token %d: frequency %.4f, want %.4f", id, got, want)
		}
	}
}

// Selecting the top k and sorting them gives the first k of a full sort,
// ties included.
func TestSelectTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(300)
		c := make([]cand, n)
		for i := range c {
			c[i] = cand{id: i, logit: float64(rng.IntN(20))}
		}
		rng.Shuffle(n, func(i, j int) { c[i], c[j] = c[j], c[i] })
		full := slices.Clone(c)
		sort.Slice(full, func(i, j int) bool { return better(full[i], full[j]) })
		k := 1 + rng.IntN(n)
		selectTop(c, k)
		top := c[:k]
		sort.Slice(top, func(i, j int) bool { return better(top[i], top[j]) })
		if !slices.Equal(top, full[:k]) {
			t.Fatalf("n=%d k=%d: got %v, want %v", n, k, top, full[:k])
		}
	}
}

func TestLogprobs(t *testing.T) {
	logits := []float32{1, 3, 2, 3}
	lp, top := Logprobs(logits, 2, 3)
	z := math.Log(math.Exp(1) + 2*math.Exp(3) + math.Exp(2))
	if math.Abs(lp-(2-z)) > 1e-9 {
		t.Errorf("logprob %v, want %v", lp, 2-z)
	}
	want := []TokenLogprob{{1, 3 - z}, {3, 3 - z}, {2, 2 - z}}
	if len(top) != 3 {
		t.Fatalf("top = %v", top)
	}
	for i := range want {
		if top[i].ID != want[i].ID || math.Abs(top[i].Logprob-want[i].Logprob) > 1e-9 {
			t.Errorf("top[%d] = %v, want %v", i, top[i], want[i])
		}
	}
	if _, top := Logprobs(logits, 0, 50); len(top) != 4 {
		t.Errorf("top capped at the vocabulary: %d", len(top))
	}
	if _, top := Logprobs(make([]float32, 100), 0, 50); len(top) != MaxTopLogprobs {
		t.Errorf("top capped at %d: %d", MaxTopLogprobs, len(top))
	}
}

func BenchmarkSample130k(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, 130560)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	s := New(Params{Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, Seed: 1, HasSeed: true})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Sample(logits, nil)
	}
}
