package engine

import (
	"context"
	"fmt"

	"github.com/npuchat/npuchat/engine/quant"
)

// Session is one sequence being computed: its position and KV cache.
// A session is not safe for concurrent use; a model can have many.
type Session struct {
	m      *Model
	pos    int
	maxCtx int
	// key and value cache per layer. Keys are in blocks of
	// quant.AttnBlock (16) positions, one per KV head in turn: position
	// p = 16b+i, KV head g, dimension d at ((b*KVHeads+g)*HeadDim+d)*16+i
	// (whole blocks, so a partial last block has room for the positions
	// to come). Values are position-major: position p's KV-head values at
	// [p*kvDim, (p+1)*kvDim).
	keys, values [][]float32
	// the same as float16 when the model's KVF16 option is set (then
	// keys and values stay empty)
	keys16, values16 [][]uint16

	// scratch, reused every step: one row per token of a batch
	x, xb, xb2, ao, q, k, v, hb, hb2 [][]float32
	cos, sin                         [][]float32 // RoPE angles of each token's position
	logits                           []float32
	logitsRow                        [1][]float32        // logits as a batch of one
	att                              []quant.AttnScratch // attention buffers, one per thread

	pool  *pool   // the session's threads
	mul   mulTask // matrix products, run on pool
	heads attnTask
}

// maxBatch is how many prompt tokens a prefill step computes together:
// each weight row is read once for the batch.
const maxBatch = 32

// NewSession starts an empty sequence that can hold maxContext positions
// (≤ 0: the model's context length, or 4096 when unknown). The KV cache
// grows as positions are added.
func (m *Model) NewSession(maxContext int) *Session {
	c := m.cfg
	if maxContext <= 0 {
		maxContext = c.ContextLength
		if maxContext <= 0 {
			maxContext = 4096
		}
	}
	if c.ContextLength > 0 && maxContext > c.ContextLength {
		maxContext = c.ContextLength
	}
	s := &Session{
		m: m, maxCtx: maxContext,
		keys: make([][]float32, c.Layers), values: make([][]float32, c.Layers),
		keys16: make([][]uint16, c.Layers), values16: make([][]uint16, c.Layers),
		logits: make([]float32, c.VocabSize),
	}
	s.pool = newPool(s, m.threads)
	return s
}

// batchRows returns n rows of size values from *buf, growing it as needed.
func batchRows(buf *[][]float32, n, size int) [][]float32 {
	for len(*buf) < n {
		*buf = append(*buf, make([]float32, size))
	}
	return (*buf)[:n]
}

// Pos is the number of positions computed so far (the next token's position).
func (s *Session) Pos() int { return s.pos }

// MaxContext is the session's position limit.
func (s *Session) MaxContext() int { return s.maxCtx }

// Rewind keeps only the first n positions, so that a new continuation can
// reuse a shared prefix.
func (s *Session) Rewind(n int) error {
	if n < 0 || n > s.pos {
		return fmt.Errorf("rewind to %d: session holds %d positions", n, s.pos)
	}
	kvDim := s.m.cfg.KVHeads * s.m.cfg.HeadDim
	// keys: whole blocks; the stale positions past n in the last one are
	// overwritten before they are read
	nk := (n + quant.AttnBlock - 1) / quant.AttnBlock * quant.AttnBlock * kvDim
	for l := range s.keys {
		if s.m.kvF16 {
			s.keys16[l] = s.keys16[l][:nk]
			s.values16[l] = s.values16[l][:n*kvDim]
			continue
		}
		s.keys[l] = s.keys[l][:nk]
		s.values[l] = s.values[l][:n*kvDim]
	}
	s.pos = n
	return nil
}

// Prefill runs every token and returns the last position's logits.
func (s *Session) Prefill(tokens []int) ([]float32, error) {
	return s.PrefillContext(context.Background(), tokens)
}

// PrefillContext is Prefill that stops between tokens when ctx is done
// (a long prompt takes a while on a CPU). The positions computed before
// the cancellation stay in the session.
func (s *Session) PrefillContext(ctx context.Context, tokens []int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("prefill: no tokens")
	}
	if s.pos+len(tokens) > s.maxCtx {
		return nil, fmt.Errorf("prefill %d tokens at position %d: %w (limit %d positions)", len(tokens), s.pos, ErrContextFull, s.maxCtx)
	}
	for _, t := range tokens {
		if t < 0 || t >= s.m.cfg.VocabSize {
			return nil, fmt.Errorf("prefill: token %d is outside the vocabulary (size %d)", t, s.m.cfg.VocabSize)
		}
	}
	for len(tokens) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("prefill stopped at position %d: %w", s.pos, err)
		}
		n := min(len(tokens), maxBatch)
		// Only the last position's logits are needed.
		s.forward(tokens[:n], s.pos, n == len(tokens))
		s.pos += n
		tokens = tokens[n:]
	}
	return s.logits, nil
}

// Forward computes token at position Pos() and returns the vocabulary
// logits; the slice is valid until the next call.
func (s *Session) Forward(token int) ([]float32, error) {
	if err := s.step(token, true); err != nil {
		return nil, err
	}
	return s.logits, nil
}

// step checks token and the context limit, then computes one position.
func (s *Session) step(token int, logits bool) error {
	c := &s.m.cfg
	if token < 0 || token >= c.VocabSize {
		return fmt.Errorf("token %d is outside the vocabulary (size %d)", token, c.VocabSize)
	}
	if s.pos >= s.maxCtx {
		return fmt.Errorf("position %d: %w (limit %d positions)", s.pos, ErrContextFull, s.maxCtx)
	}
	s.forward([]int{token}, s.pos, logits)
	s.pos++
	return nil
}

// batch is one forward step's scratch rows, one per token.
type batch struct {
	x, xb, xb2, ao, q, k, v, hb, hb2 [][]float32
	cos, sin                         [][]float32
}

// buffers returns the scratch rows for a step of n tokens, reusing the
// session's.
func (s *Session) buffers(n int) batch {
	c := &s.m.cfg
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	return batch{
		x: batchRows(&s.x, n, c.Hidden), xb: batchRows(&s.xb, n, c.Hidden), xb2: batchRows(&s.xb2, n, c.Hidden),
		ao: batchRows(&s.ao, n, qDim), q: batchRows(&s.q, n, qDim), k: batchRows(&s.k, n, kvDim), v: batchRows(&s.v, n, kvDim),
		hb: batchRows(&s.hb, n, c.FFN), hb2: batchRows(&s.hb2, n, c.FFN),
		cos: batchRows(&s.cos, n, c.RopeDim/2), sin: batchRows(&s.sin, n, c.RopeDim/2),
	}
}

// remember stores position pos's key and value in layer l's cache (the
// positions before it are there), as float16 when the model's KVF16
// option is set. Keys go into their block (a new block of zeros is added
// at each 16th position), values are appended.
func (s *Session) remember(l, pos int, k, v []float32) {
	c := &s.m.cfg
	hd, kvDim := c.HeadDim, c.KVHeads*c.HeadDim
	const blk = quant.AttnBlock
	b, i := pos/blk, pos%blk
	base := b * blk * kvDim // block b of every KV head
	if !s.m.kvF16 {
		if i == 0 {
			s.keys[l] = append(s.keys[l][:base], make([]float32, blk*kvDim)...)
		}
		keys := s.keys[l][base : base+blk*kvDim]
		for j, x := range k[:kvDim] {
			g, d := j/hd, j%hd
			keys[(g*hd+d)*blk+i] = x
		}
		s.values[l] = append(s.values[l][:pos*kvDim], v...)
		return
	}
	if i == 0 {
		s.keys16[l] = append(s.keys16[l][:base], make([]uint16, blk*kvDim)...)
	}
	keys := s.keys16[l][base : base+blk*kvDim]
	for j, x := range k[:kvDim] {
		g, d := j/hd, j%hd
		keys[(g*hd+d)*blk+i] = quant.F32ToF16(x)
	}
	vals := s.values16[l][:pos*kvDim]
	for _, x := range v {
		vals = append(vals, quant.F32ToF16(x))
	}
	s.values16[l] = vals
}
