package engine

import (
	"context"
	"fmt"
	"math"
)

// Embed returns the embedding of tokens: the last hidden state (after
// the final RMSNorm, before the output projection) of every position,
// mean-pooled and L2-normalised, as llama.cpp (--pooling mean) and
// Ollama give for a decoder model. It runs in a session of its own (the
// prompt's positions only), so it leaves every other session as it was.
func (m *Model) Embed(ctx context.Context, tokens []int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("embed: no tokens")
	}
	s := m.NewSession(len(tokens))
	if len(tokens) > s.maxCtx {
		return nil, fmt.Errorf("embed %d tokens: %w (limit %d positions)", len(tokens), ErrContextFull, s.maxCtx)
	}
	for _, t := range tokens {
		if t < 0 || t >= m.cfg.VocabSize {
			return nil, fmt.Errorf("embed: token %d is outside the vocabulary (size %d)", t, m.cfg.VocabSize)
		}
	}
	if err := s.reserve(len(tokens)); err != nil {
		return nil, fmt.Errorf("embed %d tokens: %w", len(tokens), err)
	}
	defer func() {
		if s.own != nil {
			s.own.pool.shutdown() // its threads end now, not at a garbage collection
		}
	}()
	c := &m.cfg
	sum := make([]float64, c.Hidden)
	norm := make([]float32, c.Hidden)
	for rest := tokens; len(rest) > 0; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed stopped at position %d: %w", s.pos, err)
		}
		n := min(len(rest), maxBatch)
		// Without logits, forward leaves each position's last hidden
		// state (the residual stream after the last layer) in s.own.x.
		s.forward(rest[:n], s.pos, false)
		m.poolRows(sum, s.own.x[:n], norm)
		s.pos += n
		s.tokens = append(s.tokens, rest[:n]...)
		rest = rest[n:]
	}
	return normalized(sum), nil
}

// poolRows adds each row's last hidden state after the final RMSNorm
// (into scratch, of the hidden size) to sum, in row order.
func (m *Model) poolRows(sum []float64, rows [][]float32, scratch []float32) {
	for _, x := range rows {
		rmsnorm(scratch, x, m.outNorm, m.cfg.NormEps)
		for j, v := range scratch {
			sum[j] += float64(v)
		}
	}
}

// normalized is sum scaled to unit length (zeros stay zeros).
func normalized(sum []float64) []float32 {
	var ss float64
	for _, v := range sum {
		ss += v * v
	}
	out := make([]float32, len(sum))
	if ss == 0 {
		return out
	}
	r := 1 / math.Sqrt(ss)
	for j, v := range sum {
		out[j] = float32(v * r)
	}
	return out
}
