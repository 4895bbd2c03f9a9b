package engine

import "math"

// forward is the transformer, in the order of the equations, for the
// tokens at positions pos, pos+1, … of the session, computed on its own
// stepper. Without logits it stops before the output projection
// (prefill); otherwise the logits are the last token's.
func (s *Session) forward(tokens []int, pos int, logits bool) {
	s.forwardSeg(segment{s: s, tokens: tokens, pos: pos, logits: logits})
}

// forwardSeg computes one segment of the session on its own stepper.
func (s *Session) forwardSeg(sg segment) {
	st := s.stepper()
	st.one[0] = sg
	st.forward(s.m, st.one[:])
	st.one[0] = segment{}
}

// forward computes one step: the tokens of every segment (one session's
// tokens each, at their positions) together. Each step below is done
// for every token, each matrix product multiplies all of them at once
// (one pass over the weights for the step), and each token's attention
// reads its own session's keys and values. A token's results do not
// depend on the others in the step: the products compute each vector
// alone (the kernels read a weight block once for several vectors), and
// attention is per token.
func (st *stepper) forward(m *Model, segs []segment) {
	c := &m.cfg
	hd := c.HeadDim
	st.rows = st.rows[:0]
	for _, sg := range segs {
		for i := range sg.tokens {
			st.rows = append(st.rows, rowRef{s: sg.s, pos: sg.pos + i})
		}
	}
	n := len(st.rows)
	st.buffers(c, n)
	x, xb2, q, k, v, hb, hb2, cos, sin := st.x[:n], st.xb2[:n], st.q[:n], st.k[:n], st.v[:n], st.hb[:n], st.hb2[:n], st.cos[:n], st.sin[:n]
	norm, attOut := st.xb[:n], st.ao[:n]

	t := 0
	for _, sg := range segs {
		for i, tok := range sg.tokens {
			// each position's RoPE angles, shared by every layer and head
			m.ropeAngles(cos[t], sin[t], sg.pos+i)
			// token embedding (× scale_emb for MiniCPM muP)
			m.embed.rowFloats(tok, x[t])
			scale(x[t], float32(c.EmbedScale))
			t++
		}
	}

	for l := range m.layers {
		w := &m.layers[l]

		// attention: RMSNorm, projections, optional q/k norm, RoPE
		for t := range n {
			rmsnorm(norm[t], x[t], w.attnNorm, c.NormEps)
		}
		st.mul.mul(st.pool, norm, product{q, &w.wq}, product{k, &w.wk}, product{v, &w.wv})
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

			// remember this position's key and value in its session
			r := st.rows[t]
			r.s.remember(l, r.pos, k[t], v[t])
		}

		// grouped-query attention of each token over its session's
		// positions 0..its own
		st.attention(m, attOut, q, l)
		st.mul.mul(st.pool, attOut, product{xb2, &w.wo})
		for t := range n {
			scale(xb2[t], float32(c.ResidualScale))
			add(x[t], xb2[t])
		}

		// feed-forward: RMSNorm, SwiGLU
		for t := range n {
			rmsnorm(norm[t], x[t], w.ffnNorm, c.NormEps)
		}
		st.mul.mul(st.pool, norm, product{hb, &w.gate}, product{hb2, &w.up})
		st.mul.swiglu(st.pool, m.simd.Level, hb, hb2)
		st.mul.mul(st.pool, hb, product{xb2, &w.down})
		for t := range n {
			scale(xb2[t], float32(c.ResidualScale))
			add(x[t], xb2[t])
		}
	}

	// final norm, muP logit scale, output projection of each segment's
	// last token that asks for logits, all in one product
	st.last, st.outs = st.last[:0], st.outs[:0]
	t = 0
	for _, sg := range segs {
		t += len(sg.tokens)
		switch {
		case sg.all:
			// every token's logits, each into its row of the session's
			// (a row's product is the same however many are computed)
			rows := batchRows(&sg.s.rows, len(sg.tokens), c.VocabSize)
			for i, out := range rows {
				r := x[t-len(sg.tokens)+i]
				rmsnorm(r, r, m.outNorm, c.NormEps)
				scale(r, float32(1/c.LogitScale))
				st.last = append(st.last, r)
				st.outs = append(st.outs, out)
			}
		case sg.logits:
			last := x[t-1]
			rmsnorm(last, last, m.outNorm, c.NormEps)
			scale(last, float32(1/c.LogitScale))
			st.last = append(st.last, last)
			st.outs = append(st.outs, sg.s.logits)
		}
	}
	if len(st.last) > 0 {
		st.mul.mul(st.pool, st.last, product{st.outs, &m.output})
	}
	clear(st.rows) // no session stays reachable from the stepper
	clear(st.outs)
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
