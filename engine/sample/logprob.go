package sample

import (
	"math"
	"sort"
)

// MaxTopLogprobs is the most alternatives TopLogprobs returns (OpenAI's
// limit for top_logprobs).
const MaxTopLogprobs = 20

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int
	Logprob float64
}

// Logprobs returns the log-probability of token id under the model's
// distribution (the log-softmax of logits, before penalties, truncation,
// temperature and any constraint: what the model itself thought, as
// OpenAI and llama.cpp's server report it), and the top most likely
// tokens with theirs (top ≤ MaxTopLogprobs; 0: none), most likely first.
func Logprobs(logits []float32, id, top int) (float64, []TokenLogprob) {
	if len(logits) == 0 {
		return math.Inf(-1), nil
	}
	mx := logits[0]
	for _, l := range logits {
		if l > mx {
			mx = l
		}
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - mx))
	}
	logZ := float64(mx) + math.Log(sum)
	lp := math.Inf(-1)
	if id >= 0 && id < len(logits) {
		lp = float64(logits[id]) - logZ
	}
	top = min(top, MaxTopLogprobs, len(logits))
	if top <= 0 {
		return lp, nil
	}
	// Keep the best top in a small sorted list: one pass, no allocation
	// per token.
	best := make([]TokenLogprob, 0, top+1)
	for i, l := range logits {
		v := float64(l)
		if len(best) == top && v <= best[top-1].Logprob {
			continue
		}
		j := sort.Search(len(best), func(k int) bool { return best[k].Logprob < v })
		best = append(best, TokenLogprob{})
		copy(best[j+1:], best[j:])
		best[j] = TokenLogprob{ID: i, Logprob: v}
		if len(best) > top {
			best = best[:top]
		}
	}
	for i := range best {
		best[i].Logprob -= logZ
	}
	return lp, best
}
