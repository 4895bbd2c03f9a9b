package engine

import (
	"math"
	"sync/atomic"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
)

// parallelAttention is the attention work of a step (positions × heads ×
// head dimension, summed over the batch's tokens) above which its units
// are split across the threads.
const parallelAttention = 1 << 16

// attention sets out[t] (HeadDim values per query head) to the softmax
// of q[t]·k/√HeadDim over positions 0..pos+t applied to layer l's cached
// values, for each token t of the batch; query head h reads KV head
// h/(Heads/KVHeads). The work is one unit per (token, KV head): the
// group's query heads together (quant.Attn), so every key and value load
// serves all of them. Units are shared out to the session's threads, one
// pool run per layer for the whole batch; a unit's arithmetic is the same
// however the batch is split, so prefill equals token-by-token decoding.
// The kernels are the model's SIMD level's (quant.Attn.Run: AVX-512, 8
// query heads × 16 positions per register tile; AVX2, 4 heads × 2 halves
// of 8, also at the AVX-VNNI level; or their plain-Go twin); all give
// the same results bit for bit.
func (s *Session) attention(out, q [][]float32, l, pos int) {
	c := &s.m.cfg
	a := &s.heads
	*a = attnTask{s: s, out: out, q: q, l: l, pos: pos, kern: s.m.simd.Level}
	n := len(q)
	threads := s.pool.threads
	if work := (n*pos + n*(n+1)/2) * c.Heads * c.HeadDim; work < parallelAttention {
		threads = 1
	}
	for len(s.att) < threads {
		s.att = append(s.att, quant.AttnScratch{})
	}
	if threads == 1 {
		a.part(0, 1)
	} else {
		s.pool.run(a)
	}
	*a = attnTask{}
}

// attnTask is a batch's attention, its units taken from a shared counter
// (a unit's cost grows with its token's position, and a core slowed by
// other programs takes fewer).
type attnTask struct {
	s      *Session
	out, q [][]float32
	l, pos int
	kern   simd.Level
	next   atomic.Int64
}

func (a *attnTask) part(k, _ int) {
	s := a.s
	c := &s.m.cfg
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	group := c.Heads / c.KVHeads
	gd := group * hd // a group's query values
	sc := &s.att[k]
	units := len(a.q) * c.KVHeads
	for {
		u := int(a.next.Add(1)) - 1
		if u >= units {
			return
		}
		// the longest units (last tokens) first
		t := len(a.q) - 1 - u/c.KVHeads
		g := u % c.KVHeads
		at := quant.Attn{
			HeadDim: hd, N: a.pos + t + 1, Scale: float32(1 / math.Sqrt(float64(hd))),
			KStride: quant.AttnBlock * kvDim, VStride: kvDim,
		}
		kOff, vOff := g*hd*quant.AttnBlock, g*hd
		if s.m.kvF16 {
			at.K16, at.V16 = s.kv.keys16[a.l][kOff:], s.kv.values16[a.l][vOff:]
		} else {
			at.K, at.V = s.kv.keys[a.l][kOff:], s.kv.values[a.l][vOff:]
		}
		at.Run(a.out[t][g*gd:(g+1)*gd], a.q[t][g*gd:(g+1)*gd], sc, a.kern)
	}
}
