package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// randomBatch quantizes count vectors of n Gaussian values (some with
// large outliers, some all zero) into a Q8Batch.
func randomBatch(r *rand.Rand, count, n int) *Q8Batch {
	xs := make([][]float32, count)
	for i := range xs {
		xs[i] = make([]float32, n)
		if i%7 == 6 {
			continue // an all-zero vector: d = 0
		}
		for j := range xs[i] {
			xs[i][j] = float32(r.NormFloat64())
			if r.IntN(50) == 0 {
				xs[i][j] *= 40
			}
		}
	}
	var b Q8Batch
	b.Quantize(xs, n)
	return &b
}

// packedKernels is every kernel Packed.MulQ8 has, with whether this CPU
// runs it.
var packedKernels = []struct {
	k  PackedKernel
	ok bool
}{{PackedGo, true}, {PackedAVXVNNI, HasAVXVNNI()}, {PackedAVX512, HasVNNI()}}

// TestPackedMatchesReference: a packed matrix times vectors gives, for
// every row and vector, exactly DotQ8Ref of the original row (bit for
// bit), with each kernel this CPU has (AVX-512 VNNI, AVX-VNNI) and with
// the plain-Go twin, for row counts that leave a partial group, odd block
// counts, 1 to 9 vectors at once from any first vector, and random bytes
// (every nibble and Q8 value, -128 included); the kernels write nothing
// past TileLen.
func TestPackedMatchesReference(t *testing.T) {
	t.Logf("AVX-512 VNNI: %v, AVX-VNNI: %v", HasVNNI(), HasAVXVNNI())
	for _, pk := range packedKernels {
		t.Run(pk.k.String(), func(t *testing.T) {
			if !pk.ok {
				t.Skipf("this CPU has no %s (CPUID)", pk.k)
			}
			r := rand.New(rand.NewPCG(7, 8))
			for _, typ := range q8Types {
				for _, shape := range []struct{ rows, nb int }{{1, 1}, {16, 1}, {17, 3}, {5, 2}, {33, 7}, {48, 64}, {20, 193}} {
					rb, _ := typ.RowBytes(32 * shape.nb)
					data := make([]byte, 0, shape.rows*rb)
					for range shape.rows {
						data = append(data, randomRow(r, typ, 32*shape.nb)...)
					}
					p, err := Pack(typ, shape.rows, 32*shape.nb, data, nil, 0, 0)
					if err != nil {
						t.Fatal(err)
					}
					b := randomBatch(r, 12, 32*shape.nb)
					for n := 1; n <= 9; n++ {
						first := (n * 5) % (13 - n) // 0 ≤ first ≤ 12-n
						const guard = 8
						out := make([]float32, p.TileLen(n)+guard)
						for i := range out {
							out[i] = float32(math.NaN()) // the kernel must overwrite
						}
						ref := make([]float32, p.TileLen(n))
						for g := range p.Groups() {
							p.MulQ8(pk.k, g, b, first, n, out[:p.TileLen(n)])
							p.mulQ8Ref(g, b, first, n, ref)
							for _, v := range out[p.TileLen(n):] {
								if !math.IsNaN(float64(v)) {
									t.Fatalf("%s %d×%d blocks, %d vectors: written past TileLen", typ, shape.rows, shape.nb, n)
								}
							}
							for tk := range n {
								for rr := range GroupRows {
									row := g*GroupRows + rr
									got := out[tk*GroupRows+rr]
									want := float32(0)
									if row < shape.rows {
										want = DotQ8Ref(typ, data[row*rb:(row+1)*rb], &b.Vecs[first+tk])
									}
									if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
										t.Fatalf("%s %d×%d blocks, vectors %d+%d: row %d vector %d = %v, DotQ8Ref %v",
											typ, shape.rows, shape.nb, first, n, row, first+tk, got, want)
									}
									if twin := ref[tk*GroupRows+rr]; math.Float32bits(got) != math.Float32bits(twin) && !(got == 0 && twin == 0) {
										t.Fatalf("%s %d×%d blocks, vectors %d+%d: row %d vector %d = %v, mulQ8Ref %v",
											typ, shape.rows, shape.nb, first, n, row, first+tk, got, twin)
									}
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestPackRejects: types and shapes Pack cannot take are errors.
func TestPackRejects(t *testing.T) {
	if _, err := Pack(Q4_K, 1, 256, make([]byte, 144), nil, 0, 0); err == nil {
		t.Error("Q4_K packed")
	}
	if _, err := Pack(Q4_0, 2, 32, make([]byte, 18), nil, 0, 0); err == nil {
		t.Error("short data packed")
	}
}

// BenchmarkPackedMulQ8 measures 2048-column groups (go test -bench
// PackedMulQ8): ns per row and vector, with each packed kernel and, for
// comparison, the AVX2 kernels on the rows as stored (DotQ8, DotQ8x4:
// what the avx2 level runs). rows=N sets the row count (256 stays in
// the cache; 16384 does not, as decode's weights do not).
func BenchmarkPackedMulQ8(b *testing.B) {
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
		p, _ := Pack(typ, rows, cols, data, nil, 0, 0)
		for _, n := range []int{1, 4, 16} {
			x := randomBatch(r, n, cols)
			out := make([]float32, p.TileLen(n))
			for _, pk := range packedKernels {
				if !pk.ok {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/x%d", typ, pk.k, n), func(b *testing.B) {
					for b.Loop() {
						for g := range p.Groups() {
							p.MulQ8(pk.k, g, x, 0, n, out)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n), "ns/row/vec")
				})
			}
			if !simdQ8 {
				continue
			}
			b.Run(fmt.Sprintf("%s/avx2-rows/x%d", typ, n), func(b *testing.B) {
				var four [4]float32
				for b.Loop() {
					for i := range rows {
						row := data[i*rb : (i+1)*rb]
						t := 0
						for ; t+4 <= n; t += 4 {
							DotQ8x4(typ, row, x, t, &four)
						}
						for ; t < n; t++ {
							out[0] = DotQ8(typ, row, &x.Vecs[t])
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n), "ns/row/vec")
			})
		}
	}
}
