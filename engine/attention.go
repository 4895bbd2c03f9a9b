package engine

import (
	"math"

	"github.com/npuchat/npuchat/engine/quant"
)

// parallelAttention is the attention work (positions × heads × head
// dimension) above which a token's heads are split across the threads.
const parallelAttention = 1 << 16

// attention sets out (HeadDim values per query head) to the softmax of
// q·k/√HeadDim over positions 0..pos applied to layer l's cached values;
// query head h reads KV head h/(Heads/KVHeads). Heads are split across
// threads when the context is long; each head's arithmetic is the same
// either way.
func (s *Session) attention(out, q []float32, l, pos int) {
	c := &s.m.cfg
	a := &s.heads
	a.cfg, a.out, a.q, a.pos = c, out, q, pos
	a.keys, a.values, a.keys16, a.values16 = s.keys[l], s.values[l], s.keys16[l], s.values16[l]
	n := s.pool.threads
	if (pos+1)*c.Heads*c.HeadDim < parallelAttention {
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
	keys16, values16     []uint16 // the float16 cache (KVF16) instead of keys, values
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
		f16 := a.keys16 != nil
		for t := range att {
			lo, hi := t*kvDim+kvh*hd, t*kvDim+(kvh+1)*hd
			if f16 {
				att[t] = quant.DotF16(q, a.keys16[lo:hi]) * inv
			} else {
				att[t] = quant.DotF32(q, a.keys[lo:hi]) * inv
			}
		}
		softmax(att)
		o := a.out[h*hd : (h+1)*hd]
		clear(o)
		for t, p := range att {
			lo, hi := t*kvDim+kvh*hd, t*kvDim+(kvh+1)*hd
			if f16 {
				quant.AxpyF16(o, p, a.values16[lo:hi])
			} else {
				quant.AxpyF32(o, p, a.values[lo:hi])
			}
		}
	}
}
