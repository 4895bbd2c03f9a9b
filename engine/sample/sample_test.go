package sample

import (
	"math"
	"testing"
)

func TestGreedy(t *testing.T) {
	s := New(Params{})
	if got := s.Sample([]float32{0.1, 3, -1, 2.9}, nil); got != 1 {
		t.Errorf("greedy picked %d", got)
	}
}

func TestPenalties(t *testing.T) {
	logits := []float32{2, 1.9, -1, -1.05}
	cases := []struct {
		name    string
		p       Params
		history []int
		want    int
	}{
		// repeat penalty 2: logit 2 → 1, so token 1 (1.9) wins
		{"repeat positive", Params{RepeatPenalty: 2}, []int{0}, 1},
		// negative logits are multiplied: −1 → −2 falls below −1.05; 2 → 1
		// and 1.9 → 0.95 stay above
		{"repeat negative", Params{RepeatPenalty: 2}, []int{0, 1, 2}, 0},
		// the window only sees the last token (1), so token 0 stays first
		{"repeat window", Params{RepeatPenalty: 2, RepeatLastN: 1}, []int{0, 1}, 0},
		// frequency: token 0 seen twice, 2 − 2·0.06 = 1.88 < 1.9
		{"frequency", Params{FrequencyPenalty: 0.06}, []int{0, 0}, 1},
		{"frequency once", Params{FrequencyPenalty: 0.06}, []int{0}, 0},
		// presence: once per token whatever the count, 2 − 0.2 < 1.9
		{"presence", Params{PresencePenalty: 0.2}, []int{0, 0, 0}, 1},
		{"presence small", Params{PresencePenalty: 0.05}, []int{0, 0, 0}, 0},
		{"repeat negative only", Params{RepeatPenalty: 2, RepeatLastN: 1}, []int{2}, 0},
		{"no history", Params{RepeatPenalty: 5, FrequencyPenalty: 5, PresencePenalty: 5}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]float32(nil), logits...)
			if got := New(c.p).Sample(in, c.history); got != c.want {
				t.Errorf("picked %d, want %d", got, c.want)
			}
			for i := range in {
				if in[i] != logits[i] {
					t.Fatal("Sample modified the logits")
				}
			}
		})
	}
}

// counts draws n tokens and returns how often each came up.
func counts(p Params, logits []float32, n int) []int {
	s := New(p)
	c := make([]int, len(logits))
	for i := 0; i < n; i++ {
		c[s.Sample(logits, nil)]++
	}
	return c
}

func TestSeedReproducible(t *testing.T) {
	logits := []float32{1, 1.2, 0.8, 1.1, 0.5, 0.9}
	p := Params{Temperature: 1, Seed: 42, HasSeed: true}
	a, b := New(p), New(p)
	var sa, sb []int
	for i := 0; i < 50; i++ {
		sa = append(sa, a.Sample(logits, nil))
		sb = append(sb, b.Sample(logits, nil))
	}
	differ := false
	other := New(Params{Temperature: 1, Seed: 43, HasSeed: true})
	for i := range sa {
		if sa[i] != sb[i] {
			t.Fatalf("same seed, draw %d: %d vs %d", i, sa[i], sb[i])
		}
		if other.Sample(logits, nil) != sa[i] {
			differ = true
		}
	}
	if !differ {
		t.Error("seeds 42 and 43 gave the same 50 draws")
	}
}

func TestFilters(t *testing.T) {
	// probabilities at temperature 1: softmax of log(0.5, 0.25, 0.15, 0.1)
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.25)), float32(math.Log(0.15)), float32(math.Log(0.1))}
	cases := []struct {
		name    string
		p       Params
		allowed []bool
	}{
		{"top-k 2", Params{Temperature: 1, TopK: 2}, []bool{true, true, false, false}},
		{"top-p 0.7", Params{Temperature: 1, TopP: 0.7}, []bool{true, true, false, false}},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8}, []bool{true, true, true, false}},
		{"min-p 0.4", Params{Temperature: 1, MinP: 0.4}, []bool{true, true, false, false}},
		{"min-p 0.25", Params{Temperature: 1, MinP: 0.25}, []bool{true, true, true, false}},
		{"none", Params{Temperature: 1}, []bool{true, true, true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.Seed, c.p.HasSeed = 1, true
			got := counts(c.p, logits, 4000)
			for i, ok := range c.allowed {
				if ok != (got[i] > 0) {
					t.Errorf("token %d drawn %d times, allowed %v", i, got[i], ok)
				}
			}
		})
	}
}

func TestTemperature(t *testing.T) {
	logits := []float32{0, float32(math.Log(3))} // p = 0.25, 0.75 at T=1
	n := 20000
	for _, c := range []struct {
		temp, want float64 // want: share of token 1
	}{
		{1, 0.75},
		{0.5, 0.9},  // 3² : 1 → 0.9
		{2, 0.6340}, // √3 : 1
	} {
		got := float64(counts(Params{Temperature: c.temp, Seed: 7, HasSeed: true}, logits, n)[1]) / float64(n)
		if math.Abs(got-c.want) > 0.015 {
			t.Errorf("T=%g: token 1 share %.3f, want %.3f", c.temp, got, c.want)
		}
	}
}

func TestRepeatPenaltyNegative(t *testing.T) {
	// −1 × 2 = −2 is below −1.05, so the unpenalised token wins.
	if got := New(Params{RepeatPenalty: 2}).Sample([]float32{-1, -1.05}, []int{0}); got != 1 {
		t.Errorf("picked %d, want 1", got)
	}
	// Without the penalty token 0 wins.
	if got := New(Params{}).Sample([]float32{-1, -1.05}, []int{0}); got != 0 {
		t.Errorf("picked %d, want 0", got)
	}
}
