package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/npuchat/npuchat/engine/quant"
)

// Session is one sequence being computed: its position and KV cache.
// A session is not safe for concurrent use; a model can have many.
type Session struct {
	m      *Model
	pos    int
	maxCtx int
	// key and value cache per layer: position p's KV-head values at
	// [p*kvDim, (p+1)*kvDim).
	keys, values [][]float32

	// scratch, reused every step: one row per token of a batch
	x, xb, xb2, ao, q, k, v, hb, hb2 [][]float32
	cos, sin                         [][]float32 // RoPE angles of each token's position
	logits                           []float32
	logitsRow                        [1][]float32 // logits as a batch of one
	att                              [][]float32  // attention scores, one buffer per thread

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
	for l := range s.keys {
		s.keys[l] = s.keys[l][:n*kvDim]
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

// forward is the transformer, in the order of the equations, for the
// tokens at positions pos, pos+1, …: each step below is done for every
// token (a batch), and each matrix product multiplies the whole batch
// (s.matmul). Without logits it stops before the output projection
// (prefill); otherwise the logits are the last token's.
func (s *Session) forward(tokens []int, pos int, logits bool) {
	m := s.m
	c := &m.cfg
	hd, qDim, kvDim := c.HeadDim, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	n := len(tokens)
	x, xb, xb2 := batchRows(&s.x, n, c.Hidden), batchRows(&s.xb, n, c.Hidden), batchRows(&s.xb2, n, c.Hidden)
	q, k, v := batchRows(&s.q, n, qDim), batchRows(&s.k, n, kvDim), batchRows(&s.v, n, kvDim)
	hb, hb2 := batchRows(&s.hb, n, c.FFN), batchRows(&s.hb2, n, c.FFN)
	cos, sin := batchRows(&s.cos, n, c.RopeDim/2), batchRows(&s.sin, n, c.RopeDim/2)
	norm, attOut := xb, batchRows(&s.ao, n, qDim)

	for t, tok := range tokens {
		// each position's RoPE angles, shared by every layer and head
		m.ropeAngles(cos[t], sin[t], pos+t)
		// token embedding (× scale_emb for MiniCPM muP)
		m.embed.rowFloats(tok, x[t])
		scale(x[t], float32(c.EmbedScale))
	}

	for l := range m.layers {
		w := &m.layers[l]

		// attention: RMSNorm, projections, optional q/k norm, RoPE
		for t := range n {
			rmsnorm(norm[t], x[t], w.attnNorm, c.NormEps)
		}
		s.matmul(q, &w.wq, norm)
		s.matmul(k, &w.wk, norm)
		s.matmul(v, &w.wv, norm)
		for t := range n {
			if w.bq != nil {
				add(q[t], w.bq)
				add(k[t], w.bk)
				add(v[t], w.bv)
			}
			if w.qNorm != nil {
				for h := 0; h < c.Heads; h++ {
					rmsnorm(q[t][h*hd:(h+1)*hd], q[t][h*hd:(h+1)*hd], w.qNorm, c.NormEps)
				}
				for h := 0; h < c.KVHeads; h++ {
					rmsnorm(k[t][h*hd:(h+1)*hd], k[t][h*hd:(h+1)*hd], w.kNorm, c.NormEps)
				}
			}
			m.rope(q[t], c.Heads, cos[t], sin[t])
			m.rope(k[t], c.KVHeads, cos[t], sin[t])

			// remember this position's key and value
			s.keys[l] = append(s.keys[l], k[t]...)
			s.values[l] = append(s.values[l], v[t]...)
		}

		// grouped-query attention of each token over positions 0..its own
		for t := range n {
			s.attention(attOut[t], q[t], s.keys[l], s.values[l], pos+t)
		}
		s.matmul(xb2, &w.wo, attOut)
		for t := range n {
			scale(xb2[t], float32(c.ResidualScale))
			add(x[t], xb2[t])
		}

		// feed-forward: RMSNorm, SwiGLU
		for t := range n {
			rmsnorm(norm[t], x[t], w.ffnNorm, c.NormEps)
		}
		s.matmul(hb, &w.gate, norm)
		s.matmul(hb2, &w.up, norm)
		for t := range n {
			for i, g := range hb[t] {
				hb[t][i] = silu(g) * hb2[t][i]
			}
		}
		s.matmul(xb2, &w.down, hb)
		for t := range n {
			scale(xb2[t], float32(c.ResidualScale))
			add(x[t], xb2[t])
		}
	}

	if !logits {
		return
	}

	// final norm, muP logit scale, output projection of the last token
	last := x[n-1:]
	rmsnorm(last[0], last[0], m.outNorm, c.NormEps)
	scale(last[0], float32(1/c.LogitScale))
	s.logitsRow[0] = s.logits
	s.matmul(s.logitsRow[:], &m.output, last)
}

// matmul sets outs[t] = W·xs[t] for each token t of the batch, splitting
// W's rows across the session's threads.
func (s *Session) matmul(outs [][]float32, w *matrix, xs [][]float32) {
	s.mul.mul(s.pool, outs, w, xs)
}

// rmsnorm sets out = x / √(mean(x²) + eps) · w. out may alias x.
func rmsnorm(out, x, w []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(1 / math.Sqrt(ss/float64(len(x))+eps))
	for i, v := range x {
		out[i] = v * r * w[i]
	}
}

// attention sets out (HeadDim values per query head) to the softmax of
// q·k/√HeadDim over positions 0..pos applied to the cached values; query
// head h reads KV head h/(Heads/KVHeads). Heads are split across threads
// when the context is long; each head's arithmetic is the same either way.
func (s *Session) attention(out, q, keys, values []float32, pos int) {
	c := &s.m.cfg
	a := &s.heads
	a.cfg, a.out, a.q, a.keys, a.values, a.pos = c, out, q, keys, values, pos
	n := s.pool.threads
	if (pos+1)*c.Heads*c.HeadDim < 1<<16 {
		n = 1
	}
	for len(s.att) < n {
		s.att = append(s.att, nil)
	}
	for i := range n {
		if cap(s.att[i]) < pos+1 {
			s.att[i] = make([]float32, pos+1, 2*(pos+1))
		}
	}
	a.att = s.att
	if n == 1 {
		a.part(0, 1)
	} else {
		s.pool.run(a)
	}
	*a = attnTask{}
}

// attnTask is attention split by query heads.
type attnTask struct {
	cfg                  *Config
	out, q, keys, values []float32
	pos                  int
	att                  [][]float32 // score buffers, one per part
}

func (a *attnTask) part(k, n int) {
	c := a.cfg
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	group := c.Heads / c.KVHeads
	inv := float32(1 / math.Sqrt(float64(hd)))
	att := a.att[k][:a.pos+1]
	for h := k; h < c.Heads; h += n {
		q := a.q[h*hd : (h+1)*hd]
		kvh := h / group
		for t := range att {
			att[t] = quant.DotF32(q, a.keys[t*kvDim+kvh*hd:t*kvDim+(kvh+1)*hd]) * inv
		}
		softmax(att)
		o := a.out[h*hd : (h+1)*hd]
		clear(o)
		for t, p := range att {
			quant.AxpyF32(o, p, a.values[t*kvDim+kvh*hd:t*kvDim+(kvh+1)*hd])
		}
	}
}

// ropeAngles sets cos[i], sin[i] of θ_i = pos·scale·theta^(−2i/d) / factor_i,
// computed as ggml does (θ multiplied by theta^(−2/d) per pair, in float32).
func (m *Model) ropeAngles(cos, sin []float32, pos int) {
	c := &m.cfg
	thetaScale := float32(math.Pow(c.RopeTheta, -2/float64(c.RopeDim)))
	theta := float32(pos) * float32(c.RopeScale)
	for i := range cos {
		t := theta
		if m.ropeFactors != nil {
			t /= m.ropeFactors[i]
		}
		cos[i] = float32(math.Cos(float64(t)))
		sin[i] = float32(math.Sin(float64(t)))
		theta *= thetaScale
	}
}

// rope rotates the first RopeDim values of each of n heads in v by the
// given angles, pairing values as the model's RopeLayout says.
func (m *Model) rope(v []float32, n int, cos, sin []float32) {
	c := &m.cfg
	half := c.RopeDim / 2
	for h := 0; h < n; h++ {
		x := v[h*c.HeadDim : h*c.HeadDim+c.RopeDim]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1 // normal: consecutive pairs
			if c.RopeLayout == RopeNeox {
				a, b = i, i+half
			}
			x0, x1 := x[a], x[b]
			x[a] = x0*cos[i] - x1*sin[i]
			x[b] = x0*sin[i] + x1*cos[i]
		}
	}
}

func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func add(y, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}

func scale(x []float32, s float32) {
	if s == 1 {
		return
	}
	for i := range x {
		x[i] *= s
	}
}
