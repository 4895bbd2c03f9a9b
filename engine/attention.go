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
// of q[t]·k/√HeadDim over positions 0..pos of row t's session (st.rows)
// applied to layer l's cached values of that session, for each token t
// of the step; query head h reads KV head h/(Heads/KVHeads). The work is
// one unit per (token, KV head): the group's query heads together
// (quant.Attn), so every key and value load serves all of them. Units
// are shared out to the threads, one pool run per layer for the whole
// step; a unit's arithmetic is the same however the step is split and
// whatever else is in it, so prefill equals token-by-token decoding and
// a sequence decoded beside others equals it decoded alone.
// The kernels are the model's SIMD level's (quant.Attn.Run: AVX-512, 8
// query heads × 16 positions per register tile; AVX2, 4 heads × 2 halves
// of 8, also at the AVX-VNNI level; or their plain-Go twin); all give
// the same results bit for bit.
func (st *stepper) attention(m *Model, out, q [][]float32, l int) {
	c := &m.cfg
	a := &st.heads
	*a = attnTask{m: m, st: st, out: out, q: q, l: l, kern: m.simd.Level}
	threads := st.pool.threads
	work := 0
	for _, r := range st.rows {
		work += r.pos + 1
	}
	if work*c.Heads*c.HeadDim < parallelAttention {
		threads = 1
	}
	for len(st.att) < threads {
		st.att = append(st.att, quant.AttnScratch{})
	}
	if threads == 1 {
		a.part(0, 1)
	} else {
		st.pool.run(a)
	}
	*a = attnTask{}
}

// attnTask is a step's attention, its units taken from a shared counter
// (a unit's cost grows with its token's position, and a core slowed by
// other programs takes fewer).
type attnTask struct {
	m      *Model
	st     *stepper
	out, q [][]float32
	l      int
	kern   simd.Level
	next   atomic.Int64
}

func (a *attnTask) part(k, _ int) {
	m := a.m
	c := &m.cfg
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	group := c.Heads / c.KVHeads
	gd := group * hd // a group's query values
	sc := &a.st.att[k]
	units := len(a.q) * c.KVHeads
	for {
		u := int(a.next.Add(1)) - 1
		if u >= units {
			return
		}
		// the last tokens first (in a prefill, the longest units)
		t := len(a.q) - 1 - u/c.KVHeads
		g := u % c.KVHeads
		r := a.st.rows[t]
		at := quant.Attn{
			HeadDim: hd, N: r.pos + 1, Scale: float32(1 / math.Sqrt(float64(hd))),
			KStride: quant.AttnBlock * kvDim, VStride: kvDim,
		}
		kOff, vOff := g*hd*quant.AttnBlock, g*hd
		kv := r.s.kv
		switch m.kv {
		case kvQ8: // HeadDim a multiple of 32: a KV head's scales start at its offset / 32
			const b8 = quant.KVBlock8
			at.K8, at.V8 = kv.keys8[a.l][kOff:], kv.values8[a.l][vOff:]
			at.KD, at.VD = kv.keysD[a.l][kOff/b8:], kv.valuesD[a.l][vOff/b8:]
			at.KDStride, at.VDStride = at.KStride/b8, kvDim/b8
		case kvF16:
			at.K16, at.V16 = kv.keys16[a.l][kOff:], kv.values16[a.l][vOff:]
		default:
			at.K, at.V = kv.keys[a.l][kOff:], kv.values[a.l][vOff:]
		}
		at.Run(a.out[t][g*gd:(g+1)*gd], a.q[t][g*gd:(g+1)*gd], sc, a.kern)
	}
}
