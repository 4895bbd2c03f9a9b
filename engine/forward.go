package engine

import (
	"context"
	"fmt"
	"math"
	"sync"
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

	// scratch buffers, reused every step
	x, xb, xb2, q, k, v, hb, hb2, logits []float32
	att                                  [][]float32 // attention scores, one buffer per thread
	cos, sin                             []float32   // RoPE angles of the current position
}

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
	kvDim := c.KVHeads * c.HeadDim
	return &Session{
		m: m, maxCtx: maxContext,
		keys: make([][]float32, c.Layers), values: make([][]float32, c.Layers),
		x: make([]float32, c.Hidden), xb: make([]float32, max(c.Hidden, c.Heads*c.HeadDim)),
		xb2: make([]float32, c.Hidden), q: make([]float32, c.Heads*c.HeadDim),
		k: make([]float32, kvDim), v: make([]float32, kvDim),
		hb: make([]float32, c.FFN), hb2: make([]float32, c.FFN),
		logits: make([]float32, c.VocabSize),
		cos:    make([]float32, c.RopeDim/2), sin: make([]float32, c.RopeDim/2),
	}
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
	for i, t := range tokens {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("prefill stopped at position %d: %w", s.pos, err)
		}
		// Only the last position's logits are needed.
		if err := s.step(t, i == len(tokens)-1); err != nil {
			return nil, err
		}
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
	s.forward(token, s.pos, logits)
	s.pos++
	return nil
}

// forward is the transformer, in the order of the equations. Without
// logits it stops before the output projection (prefill).
func (s *Session) forward(token, pos int, logits bool) {
	m := s.m
	c := &m.cfg
	hd := c.HeadDim
	x := s.x
	th := m.threads

	// this position's RoPE angles, shared by every layer and head
	m.ropeAngles(s.cos, s.sin, pos)

	// token embedding (× scale_emb for MiniCPM muP)
	m.embed.rowFloats(token, x)
	scale(x, float32(c.EmbedScale))

	for l := range m.layers {
		w := &m.layers[l]

		// attention: RMSNorm, projections, optional q/k norm, RoPE
		rmsnorm(s.xb, x, w.attnNorm, c.NormEps)
		matvec(s.q, &w.wq, s.xb, th)
		matvec(s.k, &w.wk, s.xb, th)
		matvec(s.v, &w.wv, s.xb, th)
		if w.bq != nil {
			add(s.q, w.bq)
			add(s.k, w.bk)
			add(s.v, w.bv)
		}
		if w.qNorm != nil {
			for h := 0; h < c.Heads; h++ {
				rmsnorm(s.q[h*hd:(h+1)*hd], s.q[h*hd:(h+1)*hd], w.qNorm, c.NormEps)
			}
			for h := 0; h < c.KVHeads; h++ {
				rmsnorm(s.k[h*hd:(h+1)*hd], s.k[h*hd:(h+1)*hd], w.kNorm, c.NormEps)
			}
		}
		m.rope(s.q, c.Heads, s.cos, s.sin)
		m.rope(s.k, c.KVHeads, s.cos, s.sin)

		// remember this position's key and value
		s.keys[l] = append(s.keys[l], s.k...)
		s.values[l] = append(s.values[l], s.v...)

		// grouped-query attention over positions 0..pos
		out := s.xb[:c.Heads*hd]
		s.attention(out, s.keys[l], s.values[l], pos)
		matvec(s.xb2, &w.wo, out, th)
		scale(s.xb2, float32(c.ResidualScale))
		add(x, s.xb2)

		// feed-forward: RMSNorm, SwiGLU
		rmsnorm(s.xb, x, w.ffnNorm, c.NormEps)
		matvec(s.hb, &w.gate, s.xb, th)
		matvec(s.hb2, &w.up, s.xb, th)
		for i, g := range s.hb {
			s.hb[i] = silu(g) * s.hb2[i]
		}
		matvec(s.xb2, &w.down, s.hb, th)
		scale(s.xb2, float32(c.ResidualScale))
		add(x, s.xb2)
	}

	if !logits {
		return
	}

	// final norm, muP logit scale, output projection
	rmsnorm(x, x, m.outNorm, c.NormEps)
	scale(x, float32(1/c.LogitScale))
	matvec(s.logits, &m.output, x, th)
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
func (s *Session) attention(out, keys, values []float32, pos int) {
	c := &s.m.cfg
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	group := c.Heads / c.KVHeads
	inv := float32(1 / math.Sqrt(float64(hd)))
	head := func(h int, att []float32) {
		q := s.q[h*hd : (h+1)*hd]
		kvh := h / group
		for t := 0; t <= pos; t++ {
			att[t] = dot(q, keys[t*kvDim+kvh*hd:t*kvDim+(kvh+1)*hd]) * inv
		}
		softmax(att)
		o := out[h*hd : (h+1)*hd]
		clear(o)
		for t := 0; t <= pos; t++ {
			axpy(o, att[t], values[t*kvDim+kvh*hd:t*kvDim+(kvh+1)*hd])
		}
	}
	n := min(s.m.threads, c.Heads)
	if (pos+1)*c.Heads*hd < 1<<16 {
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
	if n == 1 {
		for h := 0; h < c.Heads; h++ {
			head(h, s.att[0][:pos+1])
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := i; h < c.Heads; h += n {
				head(h, s.att[i][:pos+1])
			}
		}()
	}
	wg.Wait()
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

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy sets y += a·x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

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
