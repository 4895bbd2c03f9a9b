package quant

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
)

// BenchmarkPackedAVX2 compares the AVX2 packed kernels with the AVX2
// row kernels (DotQ8, DotQ8x4) on 2048-column rows: ns per row and
// vector (BENCH_ROWS as in BenchmarkPackedMulQ8).
func BenchmarkPackedAVX2(b *testing.B) {
	if !simd.Host().Has(simd.AVX2) {
		b.Skipf("CPU lacks avx2: it %s", simd.Host().Lacks(simd.AVX2))
	}
	r := rand.New(rand.NewPCG(1, 1))
	const cols = 2048
	rows := 256
	if v, err := strconv.Atoi(os.Getenv("BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	for _, typ := range q8Types {
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, 0, rows*rb)
		for range rows {
			data = append(data, randomRow(r, typ, cols)...)
		}
		p, _, _ := Pack(simd.AVX2, typ, rows, cols, data, nil, 0, 0)
		for _, n := range []int{1, 8, 32} {
			x := randomBatch(r, n, cols)
			out := make([]float32, p.TileLen(n))
			b.Run(typ.String()+"/packed/x"+strconv.Itoa(n), func(b *testing.B) {
				for b.Loop() {
					for g := range p.Groups() {
						p.MulQ8(simd.AVX2, g, x, 0, n, out)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n), "ns/row/vec")
			})
			b.Run(typ.String()+"/rows/x"+strconv.Itoa(n), func(b *testing.B) {
				var four [4]float32
				for b.Loop() {
					for i := range rows {
						row := data[i*rb : (i+1)*rb]
						t := 0
						for ; t+4 <= n; t += 4 {
							DotQ8x4(simd.AVX2, typ, row, x, t, &four)
						}
						for ; t < n; t++ {
							out[0] = DotQ8(simd.AVX2, typ, row, &x.Vecs[t])
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n), "ns/row/vec")
			})
		}
	}
}

// BenchmarkPackGroups measures repacking a 1024×2048 matrix group by
// group: the plain-Go packer against the AVX2 one (ns per row).
func BenchmarkPackGroups(b *testing.B) {
	if !simd.Host().Has(simd.AVX2) {
		b.Skipf("CPU lacks avx2 (it %s)", simd.Host().Lacks(simd.AVX2))
	}
	r := rand.New(rand.NewPCG(2, 2))
	const rows, cols = 1024, 2048
	for _, typ := range q8Types {
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, rows*rb)
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		p, _ := NewPacked(typ, rows, cols, make([]byte, PackedBytes(typ, rows, cols)))
		for _, k := range []string{"go", "avx2"} {
			b.Run(typ.String()+"/"+k, func(b *testing.B) {
				for b.Loop() {
					for g := range p.Groups() {
						if k == "go" || !packGroupAVX2(p, g, data, rb) {
							p.packGroup(g, data, rb)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
			})
		}
	}
}
