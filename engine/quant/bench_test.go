package quant

import (
	"math/rand/v2"
	"testing"
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
