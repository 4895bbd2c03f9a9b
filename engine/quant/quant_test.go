package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16Conversions(t *testing.T) {
	cases := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3800, 0.5}, {0x7bff, 65504},
		{0x0001, float32(math.Ldexp(1, -24))}, {0x0400, float32(math.Ldexp(1, -14))},
		{0x3555, 0.333251953125},
	}
	for _, c := range cases {
		if got := F16ToF32(c.h); got != c.f {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	// Every finite half survives a round trip.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := F32ToF16(F16ToF32(uint16(h))); got != uint16(h) && !(h == 0x8000 && got == 0x8000) {
			t.Fatalf("round trip %#04x -> %#04x", h, got)
		}
	}
	// Ties round to even: 1 + 2^-11 lies halfway between 1 and 1+2^-10.
	if got := F32ToF16(1 + float32(math.Ldexp(1, -11))); got != 0x3c00 {
		t.Errorf("tie to even: got %#04x", got)
	}
	if got := F32ToBF16(1.00390625); got != 0x3f80 { // halfway, rounds to even
		t.Errorf("F32ToBF16 tie: got %#04x", got)
	}
	if got := F32ToBF16(1.01171875); got != 0x3f82 { // 1+3·2^-8: halfway up to even
		t.Errorf("F32ToBF16 tie up: got %#04x", got)
	}
}

func put16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

// TestDequantizeHandBlocks checks each block layout against values worked
// out by hand from ggml's definitions.
func TestDequantizeHandBlocks(t *testing.T) {
	type probe struct {
		i int
		v float32
	}
	q80 := make([]byte, 34)
	put16(q80, 0x3800) // d = 0.5
	q80[2], q80[3], q80[33] = 0x80, 7, 0xff
	q40 := make([]byte, 18)
	put16(q40, 0x4000) // d = 2
	q40[2] = 0x9f
	q41 := make([]byte, 20)
	put16(q41, 0x3400)     // d = 0.25
	put16(q41[2:], 0xbc00) // m = -1
	q41[4] = 0x3a
	q41b := make([]byte, 20)
	put16(q41b, 0x3e80)     // bf16 0.25
	put16(q41b[2:], 0xbf80) // bf16 -1
	q41b[4] = 0x3a
	q4k := make([]byte, 144)
	put16(q4k, 0x3c00)     // d = 1
	put16(q4k[2:], 0x3800) // dmin = 0.5
	q4k[4+0] = 3 | 1<<6    // sc0 = 3; bit 6 is bit 4 of sc4
	q4k[4+4] = 2           // m0 = 2
	q4k[4+8] = 0x75        // sc4 low = 5, m4 low = 7
	q4k[16+0] = 0x4b       // value 0: nibble 11; value 32: nibble 4
	q4k[16+64] = 0x02      // value 128: nibble 2
	q6k := make([]byte, 210)
	q6k[0] = 0x21            // ql[0]
	q6k[128] = 0x06          // qh[0]
	q6k[192+0] = 2           // scales[0]
	q6k[192+2] = 0xfd        // scales[2] = -3
	q6k[192+4] = 1           // scales[4]
	put16(q6k[208:], 0x3800) // d = 0.5
	q50 := make([]byte, 22)
	put16(q50, 0x4000) // d = 2
	q50[2] = 0x01      // qh bit 0: value 0 gets its fifth bit
	q50[4] = 0x01      // qh bit 16: value 16 gets its fifth bit
	q50[6+0] = 0x3f    // value 0: 15|16 = 31 → 15·2; value 16: 3|16 = 19 → 3·2
	q50[6+1] = 0x01    // value 1: 1 → −15·2; value 17: 0 → −16·2
	q51 := make([]byte, 24)
	put16(q51, 0x3800)     // d = 0.5
	put16(q51[2:], 0xbc00) // m = −1
	q51[4+3] = 0x80        // qh bit 31: value 31 gets its fifth bit
	q51[8+15] = 0x20       // value 15: 0; value 31: 2|16 = 18 → 9 − 1
	q5k := make([]byte, 176)
	put16(q5k, 0x3c00)                    // d = 1
	put16(q5k[2:], 0x3800)                // dmin = 0.5
	q5k[4+0] = 3                          // sc0 = 3
	q5k[4+4] = 2                          // m0 = 2
	q5k[4+1] = 5                          // sc1 = 5, m1 = 0
	q5k[16+0] = 0x01 | 0x02 | 0x04        // qh[0]: fifth bit for values 0, 32, 64
	q5k[48+0] = 0x21                      // value 0: 1+16 = 17 → 3·17 − 1 = 50; value 32: 2+16 → 5·18 = 90
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0} // 1, -2
	bf16 := []byte{0x80, 0x3f, 0x00, 0xc0}
	f32 := make([]byte, 8)
	binary.LittleEndian.PutUint32(f32, math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(f32[4:], math.Float32bits(-3))
	cases := []struct {
		name   string
		t      Type
		n      int
		row    []byte
		probes []probe
	}{
		{"F32", F32, 2, f32, []probe{{0, 1.5}, {1, -3}}},
		{"F16", F16, 2, f16, []probe{{0, 1}, {1, -2}}},
		{"BF16", BF16, 2, bf16, []probe{{0, 1}, {1, -2}}},
		{"Q8_0", Q8_0, 32, q80, []probe{{0, -64}, {1, 3.5}, {31, -0.5}, {2, 0}}},
		{"Q4_0", Q4_0, 32, q40, []probe{{0, 14}, {16, 2}, {1, -16}, {17, -16}}},
		{"Q4_1", Q4_1, 32, q41, []probe{{0, 1.5}, {16, -0.25}, {1, -1}}},
		{"Q4_1BF16", Q4_1BF16, 32, q41b, []probe{{0, 1.5}, {16, -0.25}, {1, -1}}},
		{"Q5_0", Q5_0, 32, q50, []probe{{0, 30}, {16, 6}, {1, -30}, {17, -32}}},
		{"Q5_1", Q5_1, 32, q51, []probe{{31, 8}, {15, -1}, {0, -1}}},
		{"Q5_K", Q5_K, 256, q5k, []probe{{0, 50}, {32, 90}, {1, -1}, {64, 0}}},
		{"Q4_K", Q4_K, 256, q4k, []probe{{0, 32}, {32, 0}, {1, -1}, {128, 38.5}, {129, -3.5}}},
		{"Q6_K", Q6_K, 256, q6k, []probe{{0, 1}, {32, 24}, {64, -15}, {1, -32}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n, err := c.t.RowBytes(c.n); err != nil || n != len(c.row) {
				t.Fatalf("RowBytes(%d) = %d, %v; want %d", c.n, n, err, len(c.row))
			}
			got := make([]float32, c.n)
			Dequantize(c.t, c.row, got)
			for _, p := range c.probes {
				if got[p.i] != p.v {
					t.Errorf("value %d = %v, want %v", p.i, got[p.i], p.v)
				}
			}
		})
	}
}

// randomRow fills a row of type t with random bytes whose scale fields are
// sane numbers (random f16 bits could be inf or nan).
func randomRow(r *rand.Rand, t Type, n int) []byte {
	nb, _ := t.RowBytes(n)
	row := make([]byte, nb)
	for i := range row {
		row[i] = byte(r.UintN(256))
	}
	scale := func() uint16 { return F32ToF16(float32(r.Float64()*0.1 - 0.05)) }
	switch t {
	case F32:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(float32(r.NormFloat64())))
		}
	case F16:
		for i := 0; i < n; i++ {
			put16(row[2*i:], F32ToF16(float32(r.NormFloat64())))
		}
	case BF16:
		for i := 0; i < n; i++ {
			put16(row[2*i:], F32ToBF16(float32(r.NormFloat64())))
		}
	case Q8_0, Q4_0:
		bb := t.BlockBytes()
		for b := 0; b < nb/bb; b++ {
			put16(row[b*bb:], scale())
		}
	case Q4_1:
		for b := 0; b < nb/20; b++ {
			put16(row[b*20:], scale())
			put16(row[b*20+2:], scale())
		}
	case Q4_1BF16:
		for b := 0; b < nb/20; b++ {
			put16(row[b*20:], F32ToBF16(float32(r.Float64()*0.1)))
			put16(row[b*20+2:], F32ToBF16(float32(r.Float64()*0.1-0.05)))
		}
	case Q5_0:
		for b := 0; b < nb/22; b++ {
			put16(row[b*22:], scale())
		}
	case Q5_1:
		for b := 0; b < nb/24; b++ {
			put16(row[b*24:], scale())
			put16(row[b*24+2:], scale())
		}
	case Q5_K:
		for b := 0; b < nb/176; b++ {
			put16(row[b*176:], scale())
			put16(row[b*176+2:], scale())
		}
	case Q4_K:
		for b := 0; b < nb/144; b++ {
			put16(row[b*144:], scale())
			put16(row[b*144+2:], scale())
		}
	case Q6_K:
		for b := 0; b < nb/210; b++ {
			put16(row[b*210+208:], scale())
		}
	}
	return row
}

// TestDotMatchesDequantize compares every fused kernel with the reference
// dequantize-then-dot, in float64.
func TestDotMatchesDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_1BF16, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K} {
		for _, n := range []int{256, 512, 2048} {
			row := randomRow(r, typ, n)
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			w := make([]float32, n)
			Dequantize(typ, row, w)
			var want, mag float64
			for i := range w {
				want += float64(w[i]) * float64(x[i])
				mag += math.Abs(float64(w[i]) * float64(x[i]))
			}
			sums := make([]float32, n/32)
			BlockSums(x, sums)
			for name, got := range map[string]float32{"Dot": Dot(typ, row, x), "DotSums": DotSums(typ, row, x, sums)} {
				if d := math.Abs(float64(got) - want); d > 1e-5*mag+1e-6 {
					t.Errorf("%s n=%d: %s = %v, reference %v (|Δ| %g, Σ|wx| %g)", typ, n, name, got, want, d, mag)
				}
			}
		}
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i-20) * 0.1
	}
	x[40] = 0 // second block max is x[63] = 4.3
	dst := make([]byte, 68)
	QuantizeQ8_0(x, dst)
	// Block 0: amax = 2.0 (x[0] = -2.0), d = 2/127.
	d0 := F16ToF32(binary.LittleEndian.Uint16(dst))
	if d0 != F16ToF32(F32ToF16(2.0/127)) {
		t.Errorf("block 0 scale %v", d0)
	}
	if q := int8(dst[2]); q != -127 {
		t.Errorf("x[0] quantized to %d, want -127", q)
	}
	if q := int8(dst[2+20]); q != 0 {
		t.Errorf("x[20] quantized to %d, want 0", q)
	}
	got := make([]float32, 64)
	Dequantize(Q8_0, dst, got)
	for i := range x {
		if math.Abs(float64(got[i]-x[i])) > 4.3/127 {
			t.Errorf("value %d: %v after round trip, was %v", i, got[i], x[i])
		}
	}
	// All zeros give scale 0 and zero values, not NaN.
	z := make([]byte, 34)
	QuantizeQ8_0(make([]float32, 32), z)
	for _, b := range z {
		if b != 0 {
			t.Fatalf("zero block encodes as %v", z)
		}
	}
}

func TestRowBytesErrors(t *testing.T) {
	if _, err := Q4_K.RowBytes(100); err == nil {
		t.Error("Q4_K row of 100 accepted")
	}
	if _, err := Type(11).RowBytes(256); err == nil || Type(11).String() != "Q3_K" {
		t.Errorf("Q3_K: err %v name %s", err, Type(11))
	}
}
