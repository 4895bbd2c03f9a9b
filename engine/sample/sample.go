// Package sample picks the next token from a model's logits: greedy or
// random with temperature, top-k, top-p and min-p, after repetition,
// frequency and presence penalties.
//
// The order is llama.cpp's default chain: penalties, top-k, top-p, min-p
// (each on the probabilities of the penalised logits at temperature 1),
// then temperature, then a draw. Zero values disable a step, so
// Params{Temperature: 0.7} is plain temperature sampling.
package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Params are the sampling settings of one request.
type Params struct {
	// Temperature ≤ 0 means greedy (argmax after penalties).
	Temperature float64
	// TopP keeps the smallest set of tokens whose probability reaches
	// TopP; ≤ 0 or ≥ 1 disables it.
	TopP float64
	// MinP keeps tokens at least MinP times as likely as the most likely;
	// ≤ 0 disables it.
	MinP float64
	// RepeatPenalty divides positive logits and multiplies negative ones of
	// every token in the window (llama.cpp and Hugging Face semantics);
	// 0 or 1 disables it.
	RepeatPenalty float64
	// FrequencyPenalty subtracts count·FrequencyPenalty and PresencePenalty
	// subtracts PresencePenalty once from the logit of every token seen in
	// the window (OpenAI semantics).
	FrequencyPenalty float64
	PresencePenalty  float64
	// TopK keeps the K most likely tokens; ≤ 0 disables it.
	TopK int
	// Seed makes the draws reproducible when HasSeed is set; otherwise the
	// sampler seeds itself from the clock.
	Seed    int64
	HasSeed bool
	// RepeatLastN is the penalty window: the last N tokens of the history
	// (≤ 0: the whole history).
	RepeatLastN int
}

// Sampler draws tokens with fixed Params. It is not safe for concurrent use.
type Sampler struct {
	p    Params
	rng  *rand.Rand
	work []cand
	seen map[int]int
	mask []uint64
}

type cand struct {
	id    int
	logit float64
	p     float64
}

// New returns a sampler for p.
func New(p Params) *Sampler {
	seed := uint64(p.Seed)
	if !p.HasSeed {
		seed = uint64(time.Now().UnixNano())
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), seen: map[int]int{}}
}

// Sample returns the next token. history is the tokens the penalties look
// at: llama.cpp passes the whole sequence (prompt and generated), OpenAI's
// frequency and presence penalties count only generated tokens, so an
// OpenAI-style caller passes just those. logits is not modified.
func (s *Sampler) Sample(logits []float32, history []int) int {
	return s.draw(logits, history, nil)
}

// Constraint limits the tokens the sampler may draw: a grammar that keeps
// the output valid JSON, say (package grammar's Matcher is one).
type Constraint interface {
	// Allows reports whether token id may come next.
	Allows(id int) bool
	// Mask sets bit id%64 of allowed[id/64] for every token that may come
	// next, and clears the others.
	Mask(allowed []uint64)
}

// ErrNoToken means a constraint allowed no token at all.
var ErrNoToken = errors.New("sample: the constraint allows no token")

// SampleConstrained returns the next token among those c allows. It first
// draws as Sample does and keeps the token when c allows it (for greedy
// decoding the result is then exactly the argmax of the allowed tokens);
// otherwise it draws again from the allowed tokens only, with the same
// chain (penalties, top-k, top-p, min-p, temperature). This is
// llama.cpp's order, and it spares computing the mask for the steps where
// the model already writes something valid.
func (s *Sampler) SampleConstrained(logits []float32, history []int, c Constraint) (int, error) {
	if c == nil {
		return s.Sample(logits, history), nil
	}
	if id := s.draw(logits, history, nil); c.Allows(id) {
		return id, nil
	}
	return s.SampleMasked(logits, history, c)
}

// SampleMasked computes c's mask and draws from the allowed tokens only
// (the exact masked distribution; SampleConstrained avoids the mask when
// it can).
func (s *Sampler) SampleMasked(logits []float32, history []int, c Constraint) (int, error) {
	n := (len(logits) + 63) / 64
	if cap(s.mask) < n {
		s.mask = make([]uint64, n)
	}
	s.mask = s.mask[:n]
	c.Mask(s.mask)
	if id := s.draw(logits, history, s.mask); id >= 0 {
		return id, nil
	}
	return -1, ErrNoToken
}

// draw runs the chain over the tokens in allowed (nil: every token) and
// returns -1 when allowed is empty.
func (s *Sampler) draw(logits []float32, history []int, allowed []uint64) int {
	p := s.p
	cands := s.work[:0]
	for i, l := range logits {
		cands = append(cands, cand{id: i, logit: float64(l)})
	}
	s.work = cands
	s.penalize(cands, history)
	if allowed != nil {
		n := 0
		for _, c := range cands {
			if allowed[c.id>>6]&(1<<(uint(c.id)&63)) != 0 {
				cands[n] = c
				n++
			}
		}
		cands = cands[:n]
		if n == 0 {
			return -1
		}
	}
	if len(cands) == 0 {
		return -1
	}
	if p.Temperature <= 0 {
		best := 0
		for i, c := range cands {
			if c.logit > cands[best].logit {
				best = i
			}
		}
		return cands[best].id
	}
	// Most likely first (ties by id, for determinism). With top-k only
	// the k best are needed: select them, then sort those.
	truncate := p.TopK > 0 || p.TopP > 0 && p.TopP < 1 || p.MinP > 0
	if p.TopK > 0 && p.TopK < len(cands) {
		selectTop(cands, p.TopK)
		cands = cands[:p.TopK]
	}
	if !truncate {
		// Plain temperature sampling needs no order.
		softmax(cands, p.Temperature)
		return s.pick(cands)
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	softmax(cands, 1)
	if p.TopP > 0 && p.TopP < 1 {
		var cum float64
		for i := range cands {
			cum += cands[i].p
			if cum >= p.TopP {
				cands = cands[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		limit := p.MinP * cands[0].p
		n := 1
		for n < len(cands) && cands[n].p >= limit {
			n++
		}
		cands = cands[:n]
	}
	softmax(cands, p.Temperature)
	return s.pick(cands)
}

// pick draws one of cands by their probabilities.
func (s *Sampler) pick(cands []cand) int {
	u := s.rng.Float64()
	var cum float64
	for _, c := range cands {
		cum += c.p
		if u < cum {
			return c.id
		}
	}
	return cands[len(cands)-1].id
}

// better orders candidates: higher logit first, then lower id.
func better(a, b cand) bool {
	if a.logit != b.logit {
		return a.logit > b.logit
	}
	return a.id < b.id
}

// selectTop moves the k best candidates (by better) to the front, in no
// particular order: quickselect, linear on average.
func selectTop(c []cand, k int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		// Median of three as the pivot.
		mid := lo + (hi-lo)/2
		if better(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if better(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if better(c[hi], c[mid]) {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid]
		i, j := lo, hi
		for i <= j {
			for better(c[i], pivot) {
				i++
			}
			for better(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// penalize applies the repetition, frequency and presence penalties.
func (s *Sampler) penalize(cands []cand, history []int) {
	p := s.p
	rep := p.RepeatPenalty != 0 && p.RepeatPenalty != 1
	if !rep && p.FrequencyPenalty == 0 && p.PresencePenalty == 0 {
		return
	}
	window := history
	if p.RepeatLastN > 0 && len(window) > p.RepeatLastN {
		window = window[len(window)-p.RepeatLastN:]
	}
	clear(s.seen)
	for _, t := range window {
		if t >= 0 && t < len(cands) {
			s.seen[t]++
		}
	}
	for id, n := range s.seen {
		c := &cands[id]
		if rep {
			if c.logit > 0 {
				c.logit /= p.RepeatPenalty
			} else {
				c.logit *= p.RepeatPenalty
			}
		}
		c.logit -= float64(n)*p.FrequencyPenalty + p.PresencePenalty
	}
}

// softmax sets p of the candidates from logit/temp.
func softmax(cands []cand, temp float64) {
	mx := cands[0].logit
	for _, c := range cands {
		mx = max(mx, c.logit)
	}
	var sum float64
	for i := range cands {
		cands[i].p = math.Exp((cands[i].logit - mx) / temp)
		sum += cands[i].p
	}
	for i := range cands {
		cands[i].p /= sum
	}
}
