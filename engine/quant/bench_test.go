package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
)

// BenchmarkDot measures one 2048-value row per type (go test -bench Dot).
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []Type{F32, BF16, Q8_0, Q4_0, Q4_1, Q4_1BF16, Q4_K, Q6_K} {
		row := randomRow(r, typ, 2048)
		x := make([]float32, 2048)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		b.Run(typ.String(), func(b *testing.B) {
			for b.Loop() {
				Dot(typ, row, x)
			}
		})
		sums := make([]float32, 2048/32)
		BlockSums(x, sums)
		b.Run(typ.String()+"/sums", func(b *testing.B) {
			for b.Loop() {
				DotSums(typ, row, x, sums)
			}
		})
	}
}

// BenchmarkDotQ8 measures one 2048-value row per type against Q8
// activations (go test -bench DotQ8): the SIMD kernel and the reference.
func BenchmarkDotQ8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := randomQ8(r, 2048)
	l := simd.Host().Best(simd.AVX2)
	for _, typ := range q8Types {
		row := randomRow(r, typ, 2048)
		b.Run(typ.String()+"/"+l.String(), func(b *testing.B) {
			for b.Loop() {
				DotQ8(l, typ, row, x)
			}
		})
		var batch Q8Batch
		xs := make([][]float32, 4)
		for i := range xs {
			xs[i] = make([]float32, 2048)
			for j := range xs[i] {
				xs[i][j] = float32(r.NormFloat64())
			}
		}
		batch.Quantize(l, xs, 2048)
		b.Run(typ.String()+"/x4/"+l.String(), func(b *testing.B) {
			var out [4]float32
			for b.Loop() {
				DotQ8x4(l, typ, row, &batch, 0, &out)
			}
		})
		b.Run(typ.String()+"/ref", func(b *testing.B) {
			for b.Loop() {
				DotQ8Ref(typ, row, x)
			}
		})
	}
	a, c := make([]float32, 2048), make([]float32, 2048)
	b.Run("F32xF32/"+l.String(), func(b *testing.B) {
		for b.Loop() {
			DotF32(l, a, c)
		}
	})
	b.Run("Quantize", func(b *testing.B) {
		var v Q8Vector
		for b.Loop() {
			v.Quantize(simd.Host().Best(simd.Top), a)
		}
	})
}

// BenchmarkPackedDecode measures the one-vector (decode) packed kernels
// of every level this CPU has, per type, on a 2048-column matrix of
// 64 MiB or so, more than the caches hold, one thread: the bytes per
// second it reports are how fast one core streams weights through the
// kernel (go test -bench PackedDecode -run '^$' ./engine/quant; compare
// with tools/membw -threads 1).
func BenchmarkPackedDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const cols = 2048
	x := randomBatch(r, 1, cols)
	for _, typ := range []Type{Q4_0, Q4_1, Q4_1BF16, Q8_0} {
		rb, _ := typ.RowBytes(cols)
		rows := (64 << 20) / rb / GroupRows * GroupRows
		data := make([]byte, rows*rb)
		one := randomRow(r, typ, cols)
		for i := range rows {
			copy(data[i*rb:], one)
		}
		for _, l := range []simd.Level{simd.AVX512, simd.AVXVNNI, simd.AVX2} {
			if !simd.Host().Has(l) || !HasPackedKernel(l, typ) {
				continue
			}
			p, _, err := Pack(l, typ, rows, cols, data, nil, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]float32, p.TileLen(1))
			b.Run(typ.String()+"/"+l.String(), func(b *testing.B) {
				b.SetBytes(int64(len(p.Data)))
				for b.Loop() {
					for g := range p.Groups() {
						p.MulQ8(l, g, x, 0, 1, out)
					}
				}
			})
		}
	}
}
