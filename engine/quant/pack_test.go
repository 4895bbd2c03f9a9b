package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
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
	b.Quantize(simd.None, xs, n) // every level's rounding gives these bits
	return &b
}

// TestPackedMatchesReference: a packed matrix times vectors gives, for
// every row and vector, exactly DotQ8Ref of the original row (bit for
// bit), at every level of the ladder (each level's own packed kernels
// where it has them, else the plain-Go twin; a level the CPU lacks is
// skipped), for row counts that leave a partial group, odd block
// counts, 1 to 9 vectors at once from any first vector, and random bytes
// (every nibble and Q8 value, -128 included); the kernels write nothing
// past TileLen.
func TestPackedMatchesReference(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, l simd.Level) {
		r := rand.New(rand.NewPCG(7, 8))
		for _, typ := range q8Types {
			for _, shape := range []struct{ rows, nb int }{{1, 1}, {16, 1}, {17, 3}, {5, 2}, {33, 7}, {48, 64}, {20, 193}} {
				rb, _ := typ.RowBytes(32 * shape.nb)
				data := make([]byte, 0, shape.rows*rb)
				for range shape.rows {
					data = append(data, randomRow(r, typ, 32*shape.nb)...)
				}
				p, _, err := Pack(l, typ, shape.rows, 32*shape.nb, data, nil, 0, 0)
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
						p.MulQ8(l, g, b, first, n, out[:p.TileLen(n)])
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

// TestPackLayout: the plain-Go packGroup writes every byte of the
// result (whatever the memory held before); then, at each level, Pack
// writes packGroup's bytes for every packed type, full and partial
// groups (padding rows zero) and odd block counts, Pack over a range of
// groups leaves the others alone, and Pack says which packer ran: the
// level's own (Packer: avx512's at avx512, avx2's at avxvnni and avx2,
// plain Go at none) wherever a full group was there to take, and never
// one above the level it was given. (Packing follows the level, not the
// CPU: under NPUCHAT_CPU_CEILING=none an AVX-512 machine packs in plain
// Go.)
func TestPackLayout(t *testing.T) {
	simdtest.Each(t, testPackLayout)
}

func testPackLayout(t *testing.T, l simd.Level) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range q8Types {
		for _, shape := range []struct{ rows, nb int }{{1, 1}, {15, 2}, {16, 1}, {17, 3}, {31, 5}, {48, 64}, {37, 193}} {
			name := fmt.Sprintf("%s/%dx%d", typ, shape.rows, shape.nb)
			rb, _ := typ.RowBytes(32 * shape.nb)
			data := make([]byte, shape.rows*rb)
			for i := range data {
				data[i] = byte(r.UintN(256))
			}
			n := PackedBytes(typ, shape.rows, 32*shape.nb)
			filled := func(v byte) []byte {
				b := make([]byte, n)
				for i := range b {
					b[i] = v
				}
				return b
			}
			ref0, ref1 := filled(0), filled(0xA5)
			p0, _ := NewPacked(typ, shape.rows, 32*shape.nb, ref0)
			p1, _ := NewPacked(typ, shape.rows, 32*shape.nb, ref1)
			for g := range p0.Groups() {
				p0.packGroup(g, data, rb)
				p1.packGroup(g, data, rb)
			}
			if !bytes.Equal(ref0, ref1) {
				t.Fatalf("%s: packGroup leaves bytes unwritten", name)
			}
			// the packer that must run: the level's own where it takes a
			// group (the avx2 packer full groups only)
			want := Packer(l)
			if want == simd.AVX2 && shape.rows < GroupRows {
				want = simd.None
			}
			fast := filled(0x5A)
			_, used, err := Pack(l, typ, shape.rows, 32*shape.nb, data, fast, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if used != want || used > l {
				t.Fatalf("%s: Pack at %s ran the %s packer, want %s", name, l, used, want)
			}
			if i := firstDiff(fast, ref0); i >= 0 {
				t.Fatalf("%s: Pack at %s (the %s packer) differs from packGroup at byte %d of %d (%#x, want %#x)", name, l, used, i, n, fast[i], ref0[i])
			}
			// Pack of the second group only (the split packParallel uses)
			if p0.Groups() > 1 {
				part := filled(0x77)
				if _, _, err := Pack(l, typ, shape.rows, 32*shape.nb, data, part, 1, 2); err != nil {
					t.Fatal(err)
				}
				gb := p0.GroupBytes()
				if !bytes.Equal(part[gb:2*gb], ref0[gb:2*gb]) || !bytes.Equal(part[:gb], filled(0x77)[:gb]) || !bytes.Equal(part[2*gb:], filled(0x77)[2*gb:]) {
					t.Fatalf("%s: Pack at %s of group 1 wrote the wrong bytes", name, l)
				}
			}
		}
	}
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestPackRejects: types and shapes Pack cannot take are errors.
func TestPackRejects(t *testing.T) {
	if _, _, err := Pack(simd.None, Q4_K, 1, 256, make([]byte, 144), nil, 0, 0); err == nil {
		t.Error("Q4_K packed")
	}
	if _, _, err := Pack(simd.None, Q4_0, 2, 32, make([]byte, 18), nil, 0, 0); err == nil {
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
		p, _, _ := Pack(simd.Host().Best(simd.Top), typ, rows, cols, data, nil, 0, 0)
		for _, n := range []int{1, 4, 16} {
			x := randomBatch(r, n, cols)
			out := make([]float32, p.TileLen(n))
			for _, l := range simd.Levels() {
				if !simd.Host().Has(l) || l != simd.None && !HasPackedKernel(l, typ) {
					continue // none: the plain-Go twin
				}
				b.Run(fmt.Sprintf("%s/%s/x%d", typ, l, n), func(b *testing.B) {
					for b.Loop() {
						for g := range p.Groups() {
							p.MulQ8(l, g, x, 0, n, out)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n), "ns/row/vec")
				})
			}
			if !simd.Host().Has(simd.AVX2) {
				continue
			}
			b.Run(fmt.Sprintf("%s/avx2-rows/x%d", typ, n), func(b *testing.B) {
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
