package quant

import (
	"math"

	"github.com/npuchat/npuchat/engine/simd"
)

// AttnBlock is the number of positions in a key block of the attention
// cache layout: a block holds one KV head's keys of 16 consecutive
// positions dimension-major (position 16b+i, dimension d at d*16+i), so
// that one 16-lane load gives a dimension of 16 positions and 16 scores
// come out of one register with no horizontal sums.
const AttnBlock = 16

// AttnRows is how many query rows (the query heads of one KV group) the
// kernel computes together: every key and value load is shared by them.
const AttnRows = 8

// Attn is one unit of grouped-query attention: the query rows of one KV
// head's group, for one token, over positions 0..N-1 of that KV head.
// Exactly one of K, K16 and K8 (and of V, V16 and V8) is set: a
// float32, float16 or 8-bit (q8_0) cache.
type Attn struct {
	HeadDim int
	N       int     // positions, ≥ 1
	Scale   float32 // 1/√HeadDim
	// K: block b (positions 16b..16b+15) at K[b*KStride:][:HeadDim*16],
	// dimension-major. The last block is whole even when N is not a
	// multiple of 16 (lanes past N are read but ignored).
	K       []float32
	K16     []uint16
	KStride int
	// V: position t's HeadDim values at V[t*VStride:].
	V       []float32
	V16     []uint16
	VStride int

	// K8 and V8 are the 8-bit cache (QuantizeKV8): in K's and V's
	// layouts, each value times the float16 scale of its position's
	// block of 32 dimensions (llama.cpp's q8_0 blocks; HeadDim a multiple
	// of 32). KD holds the keys' scales, block b's at KD[b*KDStride:],
	// dimension block c of lane i at c*16+i; VD the values', position
	// t's dimension block c at VD[t*VDStride+c].
	K8       []int8
	KD       []uint16
	KDStride int
	V8       []int8
	VD       []uint16
	VDStride int
}

// AttnScratch is one thread's buffers for Attn.Run, grown as needed.
type AttnScratch struct {
	qt   []float32                     // the rows' queries transposed: qt[d*8+r]
	s    []float32                     // scores, then exp: AttnRows rows of roundup(N, 16)
	o    []float32                     // unnormalized outputs, AttnRows × HeadDim
	mx   [AttnRows * AttnBlock]float32 // per row, the 16 lane maxima
	sum  [AttnBlock]float32
	inv  [AttnRows]float32 // per row, 1/Σ exp
	mask [AttnBlock]int32  // the last block's valid lanes (-1), for AVX2
}

// attnKernel is which kernels Attn.Run uses. All compute the same
// results bit for bit.
type attnKernel int

const (
	attnGo     attnKernel = iota // plain Go (the twin of the others)
	attnAVX2                     // AVX2 + F16C, 4 rows × 2 halves of 8 lanes
	attnAVX512                   // AVX-512 F, 8 rows × 16 lanes
)

// attnKernels is the attention kernels of each level of the ladder (the
// AVX-VNNI level has no attention kernels of its own: AVX2's).
var attnKernels = [simd.NumLevels]attnKernel{
	simd.None: attnGo, simd.AVX2: attnAVX2, simd.AVXVNNI: attnAVX2, simd.AVX512: attnAVX512,
}

// attnConsts is expf's constants, 8 copies each, for the AVX2 kernel.
var attnConsts = func() (c [12 * 8]float32) {
	for i, v := range []float32{expLo, expLog2e, expC1, expC2, expP0, expP1, expP2, expP3, expP4, expP5, 1,
		math.Float32frombits(127)} {
		for j := range 8 {
			c[i*8+j] = v
		}
	}
	return c
}()

// Run sets out (len(q) values) to softmax(Scale·q_r·k_t)·v_t over t <
// N for each query row r of q (len(q)/HeadDim rows, HeadDim values each).
// l selects the SIMD kernels (those of level l, which the CPU must have:
// simd.Resolve; when HeadDim is not a multiple of 16, plain Go); they
// compute exactly what the plain-Go
// twin computes, bit for bit: separate multiplies and adds in the same order,
// 16-lane partial sums reduced in the same tree, the same exp.
//
// Per 8 rows: scores block by block (for each dimension d, one load of
// 16 keys, and per row a multiply by q_r[d] and an add), each row's
// maximum, exp(score − max) with expf's polynomial and the 16 lane sums,
// then Σ_t p_t·v_t 32 (or 16) dimensions at a time (each value load shared by the
// 8 rows), finally divided by the row's sum.
func (a *Attn) Run(out, q []float32, sc *AttnScratch, l simd.Level) {
	hd := a.HeadDim
	rows := len(q) / hd
	mustHave("Attn.Run", l)
	kern := attnKernels[l]
	if hd%16 != 0 || a.K8 != nil && hd%KVBlock8 != 0 {
		kern = attnGo
	}
	nb := (a.N + AttnBlock - 1) / AttnBlock
	ss := nb * AttnBlock
	tail := a.N - (nb-1)*AttnBlock
	sc.grow(hd, ss)
	for i := range sc.mask {
		sc.mask[i] = 0
		if i < tail {
			sc.mask[i] = -1
		}
	}
	for r0 := 0; r0 < rows; r0 += AttnRows {
		r := min(AttnRows, rows-r0)
		qr := q[r0*hd : (r0+r)*hd]
		qt := sc.qt[:hd*AttnRows]
		for d := range hd {
			for h := range AttnRows {
				v := float32(0)
				if h < r {
					v = qr[h*hd+d]
				}
				qt[d*AttnRows+h] = v
			}
		}
		switch kern {
		case attnAVX512:
			a.scoresAsm(sc, nb, tail, ss)
		case attnAVX2:
			a.scoresAVX2(sc, r, nb, ss)
		default:
			a.scoresGo(sc, r, nb, ss)
		}
		for h := range r {
			srow := sc.s[h*ss : (h+1)*ss]
			m := float32(math.Inf(-1))
			if kern != attnGo {
				for _, v := range sc.mx[h*AttnBlock : (h+1)*AttnBlock] {
					m = max(m, v)
				}
				if kern == attnAVX512 {
					attnExp(&srow[0], nb, uint64(1)<<tail-1, m, &sc.sum[0])
				} else {
					attnExpAVX2(&srow[0], nb, &sc.mask[0], m, &sc.sum[0], &attnConsts[0])
				}
			} else {
				for _, v := range srow[:a.N] {
					m = max(m, v)
				}
				expRowGo(srow[:a.N], m, &sc.sum)
			}
			// the lane sums, reduced in a fixed tree
			l := &sc.sum
			for i := range 8 {
				l[i] += l[i+8]
			}
			for i := range 4 {
				l[i] += l[i+4]
			}
			for i := range 2 {
				l[i] += l[i+2]
			}
			sc.inv[h] = 1 / (l[0] + l[1])
		}
		o := sc.o[:AttnRows*hd]
		switch kern {
		case attnAVX512:
			a.pvAsm(sc, ss)
		case attnAVX2:
			a.pvAVX2(sc, r, ss)
		default:
			a.pvGo(sc, r, ss)
		}
		for h := range r {
			inv := sc.inv[h]
			dst := out[(r0+h)*hd : (r0+h+1)*hd]
			for d, v := range o[h*hd : (h+1)*hd] {
				dst[d] = v * inv
			}
		}
	}
}

func (sc *AttnScratch) grow(hd, ss int) {
	if len(sc.qt) < hd*AttnRows {
		sc.qt = make([]float32, hd*AttnRows)
		sc.o = make([]float32, hd*AttnRows)
	}
	if len(sc.s) < AttnRows*ss {
		sc.s = make([]float32, 2*AttnRows*ss)
	}
}

// scoresGo is attnScores8's twin for the first r rows: s[h*ss+t] =
// (Σ_d q_h[d]·k_t[d]) · Scale, the sum in d order from 0.
func (a *Attn) scoresGo(sc *AttnScratch, r, nb, ss int) {
	hd := a.HeadDim
	qt := sc.qt
	for b := range nb {
		var kb []float32
		var kb16 []uint16
		var kb8 []int8
		var kd []uint16
		switch {
		case a.K8 != nil:
			kb8 = a.K8[b*a.KStride : b*a.KStride+hd*AttnBlock]
			kd = a.KD[b*a.KDStride : b*a.KDStride+hd/KVBlock8*AttnBlock]
		case a.K16 != nil:
			kb16 = a.K16[b*a.KStride : b*a.KStride+hd*AttnBlock]
		default:
			kb = a.K[b*a.KStride : b*a.KStride+hd*AttnBlock]
		}
		for h := range r {
			var acc [AttnBlock]float32
			for d := range hd {
				qd := qt[d*AttnRows+h]
				if kb8 != nil {
					k := kb8[d*AttnBlock : d*AttnBlock+AttnBlock]
					ds := kd[d/KVBlock8*AttnBlock : d/KVBlock8*AttnBlock+AttnBlock]
					for i := range acc {
						acc[i] += float32(qd * float32(float32(k[i])*F16ToF32(ds[i])))
					}
					continue
				}
				if kb16 != nil {
					k := kb16[d*AttnBlock : d*AttnBlock+AttnBlock]
					for i := range acc {
						acc[i] += float32(qd * F16ToF32(k[i]))
					}
					continue
				}
				k := kb[d*AttnBlock : d*AttnBlock+AttnBlock]
				for i := range acc {
					acc[i] += float32(qd * k[i])
				}
			}
			dst := sc.s[h*ss+b*AttnBlock : h*ss+(b+1)*AttnBlock]
			for i, v := range acc {
				dst[i] = v * a.Scale
			}
		}
	}
}

// expRowGo is attnExp's twin: s[t] = exp(s[t] − m), and sum's lane i
// accumulates the values at t ≡ i (mod 16) in t order.
func expRowGo(s []float32, m float32, sum *[AttnBlock]float32) {
	*sum = [AttnBlock]float32{}
	for t, v := range s {
		e := expf(v - m)
		s[t] = e
		sum[t%AttnBlock] += e
	}
}

// expf's constants (Cephes expf): exp(x) = 2^n · p(r), n = round(x·log2e),
// r = x − n·ln2 in two parts, p a degree-7 polynomial; x is clamped at
// expLo so that 2^n stays a normal float.
const (
	expLo    = -87.0
	expLog2e = 1.44269504088896341
	expC1    = 0.693359375
	expC2    = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
)

// expf is e^x for x ≤ 0 within a couple of ulps, in the float32
// operations attnExp does (each product rounded before the add).
func expf(x float32) float32 {
	x = max(x, expLo)
	t := float32(x * expLog2e)
	n := int32(math.RoundToEven(float64(t)))
	nf := float32(n)
	r := x - float32(nf*expC1)
	r = r - float32(nf*expC2)
	z := float32(r * r)
	y := float32(expP0*r) + expP1
	y = float32(y*r) + expP2
	y = float32(y*r) + expP3
	y = float32(y*r) + expP4
	y = float32(y*r) + expP5
	y = float32(y*z) + r
	y = y + 1
	return y * math.Float32frombits(uint32(n+127)<<23)
}

// pvGo is attnPV8's twin for the first r rows: o[h*hd+d] = Σ_t p_h[t]·v_t[d]
// in t order from 0.
func (a *Attn) pvGo(sc *AttnScratch, r, ss int) {
	hd := a.HeadDim
	for h := range r {
		o := sc.o[h*hd : (h+1)*hd]
		clear(o)
		p := sc.s[h*ss : h*ss+a.N]
		for t, pt := range p {
			if a.V8 != nil {
				v := a.V8[t*a.VStride : t*a.VStride+hd]
				ds := a.VD[t*a.VDStride : t*a.VDStride+hd/KVBlock8]
				for d := range o {
					o[d] += float32(pt * float32(float32(v[d])*F16ToF32(ds[d/KVBlock8])))
				}
				continue
			}
			if a.V16 != nil {
				v := a.V16[t*a.VStride : t*a.VStride+hd]
				for d := range o {
					o[d] += float32(pt * F16ToF32(v[d]))
				}
				continue
			}
			v := a.V[t*a.VStride : t*a.VStride+hd]
			for d := range o {
				o[d] += float32(pt * v[d])
			}
		}
	}
}
