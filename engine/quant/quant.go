// Package quant holds the weight block formats the engine reads (ggml's
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, plus Q4_1BF16, the
// row-major form FLM's Q4NX chunks are unpacked into), their plain-Go
// reference dequantization, and fused dequantize-and-dot kernels that the
// engine's matrix-vector products use.
//
// Q5_0, Q5_1 and Q5_K are supported too (common in downloaded GGUFs).
//
// The block layouts are exactly ggml's (ggml-common.h, ggml-quants.c):
// a row of n values is n/BlockSize blocks of BlockBytes each, stored
// back to back, little-endian.
//
// Two kinds of dot product:
//   - Dot and DotSums multiply a row by float32 activations: Σ dequant(w)·x
//     block by block, equal to the dequantized weights times x up to
//     float32 rounding (plain Go; the reference, and the engine's exact
//     path). DotF32 and DotF32Row are float32 × float32 with SIMD.
//   - DotQ8 and DotQ8x4 multiply Q8_0, Q4_0, Q4_1 and Q4_1BF16 rows by
//     activations rounded to 8 bits as llama.cpp rounds them (Q8Vector,
//     Q8Batch): exact integer block sums, then scales, as ggml's
//     ggml_vec_dot_q8_0_q8_0, _q4_0_q8_0 and _q4_1_q8_1 compute. DotQ8Ref
//     is their plain-Go reference.
//
// Packed is such a matrix rearranged into 16-row groups for the AVX-512
// VNNI kernels (vnni_amd64.s), which compute bit for bit what DotQ8Ref
// computes, for one vector (decode) or a batch (prefill).
//
// SIMD without cgo: the kernels are hand-written Go assembly for AVX2+FMA
// (simd_amd64.s, avx2pack_amd64.s, packavx2_amd64.s), AVX-VNNI
// (avxvnni_amd64.s) and AVX-512 VNNI (vnni_amd64.s, pack_amd64.s,
// quantize_amd64.s), so no build flags or GOEXPERIMENT are needed. Which
// of them run is the simd.Level every entry point takes (level.go),
// resolved once against CPUID by engine/simd; level none, and other
// architectures, run the plain-Go functions. Go 1.26's simd/archsimd was not used: it needs
// GOEXPERIMENT=simd at build time and lacks VNNI operations.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is a tensor element type. The values of ggml types are ggml's
// (and GGUF's) type ids; Q4_1BF16 is the engine's own.
type Type uint32

// The supported types. Numeric values match enum ggml_type.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	BF16 Type = 30
	// Q4_1BF16 is Q4_1 with bfloat16 instead of float16 scale and min:
	// per 32 values, bf16 d, bf16 m, 16 bytes of nibbles in ggml's Q4_1
	// order (byte j: low nibble value j, high nibble value j+16), w = d·q + m.
	// It is what FLM's Q4NX chunks hold, rearranged into rows.
	Q4_1BF16 Type = 1000
)

// info describes one type's block.
type info struct {
	name       string
	blockSize  int // values per block
	blockBytes int // bytes per block
}

func (t Type) info() (info, bool) {
	switch t {
	case F32:
		return info{"F32", 1, 4}, true
	case F16:
		return info{"F16", 1, 2}, true
	case BF16:
		return info{"BF16", 1, 2}, true
	case Q8_0:
		return info{"Q8_0", 32, 34}, true
	case Q4_0:
		return info{"Q4_0", 32, 18}, true
	case Q4_1:
		return info{"Q4_1", 32, 20}, true
	case Q5_0:
		return info{"Q5_0", 32, 22}, true
	case Q5_1:
		return info{"Q5_1", 32, 24}, true
	case Q4_K:
		return info{"Q4_K", 256, 144}, true
	case Q5_K:
		return info{"Q5_K", 256, 176}, true
	case Q6_K:
		return info{"Q6_K", 256, 210}, true
	case Q4_1BF16:
		return info{"Q4_1BF16", 32, 20}, true
	}
	return info{}, false
}

// Supported reports whether the engine can compute with type t.
func (t Type) Supported() bool { _, ok := t.info(); return ok }

// String returns ggml's name for the type ("Q4_K"), or "type(N)".
func (t Type) String() string {
	if i, ok := t.info(); ok {
		return i.name
	}
	if n, ok := ggmlNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ggmlNames names the ggml types the engine does not compute with, so that
// errors about them read well.
var ggmlNames = map[Type]string{
	9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 15: "Q8_K",
	16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
	22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
	29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

// BlockSize is the number of values in one block (1 for float types).
func (t Type) BlockSize() int { i, _ := t.info(); return i.blockSize }

// BlockBytes is the size of one block in bytes.
func (t Type) BlockBytes() int { i, _ := t.info(); return i.blockBytes }

// RowBytes returns the bytes a row of n values takes, or an error when n is
// not a whole number of blocks or the type is unsupported.
func (t Type) RowBytes(n int) (int, error) {
	i, ok := t.info()
	if !ok {
		return 0, fmt.Errorf("unsupported tensor type %s", t)
	}
	if n < 0 || n%i.blockSize != 0 {
		return 0, fmt.Errorf("row of %d values is not a whole number of %s blocks (%d)", n, i.name, i.blockSize)
	}
	return n / i.blockSize * i.blockBytes, nil
}

// F16ToF32 converts an IEEE half-precision value to float32 exactly.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// f16Table maps every half-precision bit pattern to its float32 value.
// It is computed once and never written again.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = f16ToF32Slow(uint16(i))
	}
	return &t
}()

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant · 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// F32ToF16 rounds a float32 to the nearest half (ties to even), as ggml's
// GGML_FP32_TO_FP16 does on the CPU.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // inf or nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is correct rounding
	}
	return sign | uint16(half)
}

// BF16ToF32 converts a bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16 (nearest, ties to even), as
// PyTorch's .to(torch.bfloat16) does.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // nan
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// Dequantize writes the n = len(dst) values of one row into dst. row must
// hold exactly RowBytes(len(dst)) bytes. This is the plain reference the
// fused kernels are tested against.
func Dequantize(t Type, row []byte, dst []float32) {
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(le16(row[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(le16(row[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := row[b*34 : b*34+34]
			d := F16ToF32(le16(blk))
			for j := 0; j < 32; j++ {
				dst[b*32+j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := row[b*18 : b*18+18]
			d := F16ToF32(le16(blk))
			for j := 0; j < 16; j++ {
				dst[b*32+j] = float32(int(blk[2+j]&0x0f)-8) * d
				dst[b*32+j+16] = float32(int(blk[2+j]>>4)-8) * d
			}
		}
	case Q4_1, Q4_1BF16:
		for b := 0; b < len(dst)/32; b++ {
			blk := row[b*20 : b*20+20]
			d, m := q41Scales(t, blk)
			for j := 0; j < 16; j++ {
				dst[b*32+j] = float32(blk[4+j]&0x0f)*d + m
				dst[b*32+j+16] = float32(blk[4+j]>>4)*d + m
			}
		}
	case Q5_0, Q5_1:
		bb := t.BlockBytes()
		for b := 0; b < len(dst)/32; b++ {
			dequantQ5(t, row[b*bb:(b+1)*bb], dst[b*32:b*32+32])
		}
	case Q4_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ4K(row[b*144:b*144+144], dst[b*256:b*256+256])
		}
	case Q5_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ5K(row[b*176:b*176+176], dst[b*256:b*256+256])
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ6K(row[b*210:b*210+210], dst[b*256:b*256+256])
		}
	default:
		panic("quant.Dequantize: unsupported type " + t.String())
	}
}

func q41Scales(t Type, blk []byte) (d, m float32) {
	if t == Q4_1BF16 {
		return BF16ToF32(le16(blk)), BF16ToF32(le16(blk[2:]))
	}
	return F16ToF32(le16(blk)), F16ToF32(le16(blk[2:]))
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j from the 12 packed scale bytes of a Q4_K block.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0x0f) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// dequantQ4K is ggml's dequantize_row_q4_K for one 144-byte block:
// f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
func dequantQ4K(blk []byte, y []float32) {
	d := F16ToF32(le16(blk))
	dmin := F16ToF32(le16(blk[2:]))
	scales := blk[4:16]
	q := blk[16:144]
	is := 0
	for j := 0; j < 256; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			y[j+l] = d1*float32(q[l]&0x0f) - m1
		}
		for l := 0; l < 32; l++ {
			y[j+32+l] = d2*float32(q[l]>>4) - m2
		}
		q = q[32:]
		is += 2
	}
}

// dequantQ5 is ggml's dequantize_row_q5_0 / q5_1 for one block: f16 d
// (and f16 m for Q5_1), 4 bytes holding the 32 fifth bits, 16 bytes of
// nibbles. Q5_0 is (q−16)·d, Q5_1 is q·d + m.
func dequantQ5(t Type, blk []byte, y []float32) {
	d := F16ToF32(le16(blk))
	var m float32
	off, bias := 2, 16
	if t == Q5_1 {
		m = F16ToF32(le16(blk[2:]))
		off, bias = 4, 0
	}
	qh := binary.LittleEndian.Uint32(blk[off:])
	qs := blk[off+4 : off+20]
	for j := 0; j < 16; j++ {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0x0f|h0)-bias)*d + m
		y[j+16] = float32(int(qs[j]>>4|h1)-bias)*d + m
	}
}

// dequantQ5K is ggml's dequantize_row_q5_K for one 176-byte block: f16 d,
// f16 dmin, 12 bytes of 6-bit scales and mins, qh[32] fifth bits, qs[128].
func dequantQ5K(blk []byte, y []float32) {
	d := F16ToF32(le16(blk))
	dmin := F16ToF32(le16(blk[2:]))
	scales := blk[4:16]
	qh := blk[16:48]
	ql := blk[48:176]
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < 256; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			h := float32(0)
			if qh[l]&u1 != 0 {
				h = 16
			}
			y[j+l] = d1*(float32(ql[l]&0x0f)+h) - m1
		}
		for l := 0; l < 32; l++ {
			h := float32(0)
			if qh[l]&u2 != 0 {
				h = 16
			}
			y[j+32+l] = d2*(float32(ql[l]>>4)+h) - m2
		}
		ql = ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

// dequantQ6K is ggml's dequantize_row_q6_K for one 210-byte block:
// ql[128] low nibbles, qh[64] high 2-bit pairs, int8 scales[16], f16 d.
func dequantQ6K(blk []byte, y []float32) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := F16ToF32(le16(blk[208:]))
	for n := 0; n < 256; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(int8((ql[l]&0x0f)|((qh[l]>>0)&3)<<4)) - 32
			q2 := int(int8((ql[l+32]&0x0f)|((qh[l]>>2)&3)<<4)) - 32
			q3 := int(int8((ql[l]>>4)|((qh[l]>>4)&3)<<4)) - 32
			q4 := int(int8((ql[l+32]>>4)|((qh[l]>>6)&3)<<4)) - 32
			y[n+l] = d * float32(int8(sc[is])) * float32(q1)
			y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		ql = ql[64:]
		qh = qh[32:]
		sc = sc[8:]
	}
}

// QuantizeQ8_0 quantizes x (a multiple of 32 values) into dst as ggml's
// quantize_row_q8_0_ref does: d = max|x|/127 stored as f16, q = round(x/d)
// with the unrounded d.
func QuantizeQ8_0(x []float32, dst []byte) {
	for b := 0; b < len(x)/32; b++ {
		blk := x[b*32 : b*32+32]
		var amax float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		out := dst[b*34 : b*34+34]
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for j, v := range blk {
			out[2+j] = byte(int8(roundf(v * id)))
		}
	}
}

// roundf rounds half away from zero, like C's roundf.
func roundf(v float32) float32 { return float32(math.Round(float64(v))) }
