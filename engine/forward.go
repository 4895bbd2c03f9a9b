package engine

import "math"

// forward is the transformer, in the order of the equations, for the
// tokens at positions pos, pos+1, …: each step below is done for every
// token (a batch), and each matrix product multiplies the whole batch
// (s.matmul). Without logits it stops before the output projection
// (prefill); otherwise the logits are the last token's.
func (s *Session) forward(tokens []int, pos int, logits bool) {
	m := s.m
	c := &m.cfg
	hd := c.HeadDim
	n := len(tokens)
	b := s.buffers(n)
	x, xb2, q, k, v, hb, hb2, cos, sin := b.x, b.xb2, b.q, b.k, b.v, b.hb, b.hb2, b.cos, b.sin
	norm, attOut := b.xb, b.ao

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
		s.matmul(norm, product{q, &w.wq}, product{k, &w.wk}, product{v, &w.wv})
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
			s.remember(l, pos+t, k[t], v[t])
		}

		// grouped-query attention of each token over positions 0..its own
		s.attention(attOut, q, l, pos)
		s.matmul(attOut, product{xb2, &w.wo})
		for t := range n {
			scale(xb2[t], float32(c.ResidualScale))
			add(x[t], xb2[t])
		}

		// feed-forward: RMSNorm, SwiGLU
		for t := range n {
			rmsnorm(norm[t], x[t], w.ffnNorm, c.NormEps)
		}
		s.matmul(norm, product{hb, &w.gate}, product{hb2, &w.up})
		s.mul.swiglu(s.pool, hb, hb2)
		s.matmul(hb, product{xb2, &w.down})
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
	s.matmul(last, product{s.logitsRow[:], &m.output})
}

// matmul sets p.outs[t] = p.w·xs[t] for each token t of the batch and
// each product p (q, k and v together), splitting the rows across the
// session's threads.
func (s *Session) matmul(xs [][]float32, prods ...product) {
	s.mul.mul(s.pool, xs, prods...)
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

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// swiglu sets h[i] = silu(h[i]) · u[i].
func swiglu(h, u []float32) {
	u = u[:len(h)]
	for i, g := range h {
		h[i] = silu(g) * u[i]
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
