package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// sampleModel is batchModel's model at the CPU's best level (the
// statistical test runs many generations).
func sampleModel(t *testing.T) *Model {
	t.Helper()
	w := randomWeights(t, 41, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	return loadT(t, p, LoadOptions{Threads: 1})
}

// picker chooses a generation's next token from its logits; d is the
// decoder (nil in plain decoding).
type picker func(logits []float32, d *Decoder) int

// generate samples n tokens after the prompt the session holds (its
// last logits first), through a Decoder unless plain, and rewinds the
// session to the prompt after.
func generate(t *testing.T, s *Session, first []float32, n int, plain bool, pick picker) []int {
	t.Helper()
	at := s.Pos()
	var d *Decoder
	if !plain {
		d = s.NewDecoder(DecodeOptions{})
	}
	l := first
	var toks []int
	for range n {
		tok := pick(l, d)
		toks = append(toks, tok)
		var err error
		if plain {
			l, err = s.Forward(tok)
		} else {
			l, err = d.Forward(context.Background(), tok)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Rewind(at); err != nil {
		t.Fatal(err)
	}
	return toks
}

// TestDecoderSampledLikePlain: at temperature > 0 with top-k, top-p,
// min-p and penalties, a Decoder with the same seed gives plain
// decoding's tokens: the sampler draws once per token from the same
// logits, and a guess is kept exactly when the draw is the guess.
func TestDecoderSampledLikePlain(t *testing.T) {
	m := sampleModel(t)
	prompt := specPrompts()[3]
	s := m.NewSession(0)
	first, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	first = slices.Clone(first)
	var kept, drafted int
	for _, p := range []sample.Params{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 20, TopP: 0.9, MinP: 0.02},
		{Temperature: 1.2, RepeatPenalty: 1.1, FrequencyPenalty: 0.2, PresencePenalty: 0.1, RepeatLastN: 16},
	} {
		for seed := range 40 {
			p.Seed, p.HasSeed = int64(seed), true
			var hist []int
			draw := func(l []float32, smp *sample.Sampler) int {
				tok := smp.Sample(l, append(slices.Clone(prompt), hist...))
				hist = append(hist, tok)
				return tok
			}
			hist = nil
			ps := sample.New(p)
			want := generate(t, s, first, 24, true, func(l []float32, _ *Decoder) int { return draw(l, ps) })
			hist = nil
			ss := sample.New(p)
			var d0 *Decoder
			got := generate(t, s, first, 24, false, func(l []float32, d *Decoder) int { d0 = d; return draw(l, ss) })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%+v: %v, plain %v", p, got, want)
			}
			kept += d0.Stats().Accepted
			drafted += d0.Stats().Drafted
		}
	}
	if kept == 0 || kept == drafted {
		t.Fatalf("%d of %d guesses kept: want some kept and some rejected", kept, drafted)
	}
	t.Logf("%d of %d guesses kept", kept, drafted)
}

// softmaxT is the distribution of logits at temperature temp.
func softmaxT(l []float32, temp float64) []float64 {
	mx := float64(slices.Max(l))
	p := make([]float64, len(l))
	var sum float64
	for i, v := range l {
		p[i] = math.Exp((float64(v) - mx) / temp)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// draw picks an index of p (which need not sum to 1: it is scaled).
func draw(r *rand.Rand, p []float64) int {
	var sum float64
	for _, x := range p {
		sum += x
	}
	u := r.Float64() * sum
	for i, x := range p {
		if u -= x; u < 0 {
			return i
		}
	}
	return len(p) - 1
}

// explicit is the speculative sampling rule written out: a pending
// guess g is kept with probability p(g), else the token is drawn from
// the residual (p without g, renormalized; or, broken, p with g left in).
func explicit(r *rand.Rand, temp float64, removeGuess bool) picker {
	return func(l []float32, d *Decoder) int {
		p := softmaxT(l, temp)
		g, ok := d.Pending()
		if !ok {
			return draw(r, p)
		}
		if r.Float64() < p[g] {
			return g
		}
		if removeGuess {
			p[g] = 0
		}
		return draw(r, p)
	}
}

// chiSquare is the two-sample chi-square statistic of equal-size
// samples a and b of categories (those seen fewer than 10 times in both
// pooled) and its degrees of freedom.
func chiSquare(a, b []int) (stat float64, df int) {
	ca, cb := map[int]int{}, map[int]int{}
	for _, x := range a {
		ca[x]++
	}
	for _, x := range b {
		cb[x]++
	}
	keys := map[int]bool{}
	for k := range ca {
		keys[k] = true
	}
	for k := range cb {
		keys[k] = true
	}
	var ks []int
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	var ra, rb int // the pooled rare categories
	cats := 0
	add := func(x, y int) {
		stat += float64((x-y)*(x-y)) / float64(x+y)
		cats++
	}
	for _, k := range ks {
		if ca[k]+cb[k] < 10 {
			ra, rb = ra+ca[k], rb+cb[k]
			continue
		}
		add(ca[k], cb[k])
	}
	if ra+rb > 0 {
		add(ra, rb)
	}
	return stat, cats - 1
}

// chiCritical is the chi-square distribution's quantile 1-0.001 for df
// degrees of freedom (Wilson-Hilferty).
func chiCritical(df int) float64 {
	const z = 3.0902 // the normal quantile 0.999
	k := float64(df)
	c := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * c * c * c
}

// guessedPrefix returns tokens x y c z x y to force after the session's
// prompt, c chosen so that after them a Decoder has c pending (the
// continuation of the earlier "x y") and the model gives c a
// probability near 1/2 at temperature temp: guesses kept and rejected
// about equally.
func guessedPrefix(t *testing.T, s *Session, temp float64) ([]int, float64) {
	t.Helper()
	at := s.Pos()
	const x, y, z = 3, 4, 5
	best, bestP := -1, 0.0
	for c := range s.m.cfg.VocabSize {
		l, err := s.Prefill([]int{x, y, c, z, x, y})
		if err != nil {
			t.Fatal(err)
		}
		if p := softmaxT(l, temp)[c]; math.Abs(p-0.5) < math.Abs(bestP-0.5) {
			best, bestP = c, p
		}
		if err := s.Rewind(at); err != nil {
			t.Fatal(err)
		}
	}
	if bestP < 0.2 || bestP > 0.8 {
		t.Fatalf("no token has a probability near 1/2 after x y c z x y (best %d: %.3f): the test needs another model", best, bestP)
	}
	return []int{x, y, best, z, x, y}, bestP
}

// TestDecoderDistribution: at temperature 1, the two tokens sampled at a
// fixed position of generations through a Decoder, after forced tokens
// that leave a guess pending there with a probability near 1/2 (kept
// and rejected about equally: the second token then comes from the
// check's logits or from a step after a rollback), are distributed as
// in plain decoding: a two-sample chi-square test on 3000 generations
// each (other seeds), for the sampler's own rule (a guess kept when the
// draw is the guess) and for the rule written out (kept with
// probability p(guess), else a draw from the residual without it,
// renormalized). The same test rejects the rule with the guess left in
// the residual, so it can fail.
func TestDecoderDistribution(t *testing.T) {
	const temp, runs = 1.0, 3000
	m := sampleModel(t)
	s := m.NewSession(0)
	if _, err := s.Prefill(specPrompts()[0]); err != nil {
		t.Fatal(err)
	}
	forcedToks, pc := guessedPrefix(t, s, temp)
	first, err := s.Prefill(forcedToks[:1])
	if err != nil {
		t.Fatal(err)
	}
	first = slices.Clone(first)
	vocab := m.cfg.VocabSize
	position := func(plain bool, seed uint64, pick func(seed uint64) picker) ([]int, DecodeStats) {
		var out []int
		var st DecodeStats
		for i := range uint64(runs) {
			var dec *Decoder
			p := pick(seed + i)
			j := 1
			toks := generate(t, s, first, len(forcedToks)+1, plain, func(l []float32, d *Decoder) int {
				dec = d
				if j++; j <= len(forcedToks) {
					return forcedToks[j-1]
				}
				return p(l, d)
			})
			n := len(toks)
			out = append(out, toks[n-2]*vocab+toks[n-1])
			if dec != nil {
				st.Drafted += dec.Stats().Drafted
				st.Accepted += dec.Stats().Accepted
			}
		}
		return out, st
	}
	sampler := func(seed uint64) picker {
		smp := sample.New(sample.Params{Temperature: temp, Seed: int64(seed), HasSeed: true})
		return func(l []float32, _ *Decoder) int { return smp.Sample(l, nil) }
	}
	rule := func(remove bool) func(seed uint64) picker {
		return func(seed uint64) picker { return explicit(rand.New(rand.NewPCG(seed, 7)), temp, remove) }
	}
	plain, _ := position(true, 1_000_000, sampler)
	for _, tc := range []struct {
		name string
		pick func(seed uint64) picker
		same bool
	}{
		{"sampler", sampler, true},
		{"explicit rule", rule(true), true},
		{"guess left in the residual", rule(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st := position(false, 1, tc.pick)
			stat, df := chiSquare(got, plain)
			crit := chiCritical(df)
			t.Logf("guess probability %.3f; chi-square %.1f, %d degrees of freedom, critical %.1f; %d of %d guesses kept", pc, stat, df, crit, st.Accepted, st.Drafted)
			if st.Accepted < runs/4 || st.Drafted-st.Accepted < runs/4 {
				t.Fatalf("guesses %+v: want many kept and many rejected", st)
			}
			if tc.same && stat > crit {
				t.Errorf("the tokens' distribution differs from plain decoding's: chi-square %.1f > %.1f (df %d)", stat, crit, df)
			}
			if !tc.same && stat <= crit {
				t.Errorf("a wrong rule passed: chi-square %.1f <= %.1f (df %d)", stat, crit, df)
			}
		})
	}
}
