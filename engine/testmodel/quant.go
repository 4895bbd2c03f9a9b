package testmodel

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TensorType is a ggml tensor type; the values are ggml's enum ggml_type.
type TensorType uint32

// The tensor types the writers produce.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q4_0 TensorType = 2
	Q4_1 TensorType = 3
	Q8_0 TensorType = 8
	BF16 TensorType = 30
)

// QK is the number of weights in one ggml quantization block.
const QK = 32

// String returns ggml's name of the type.
func (t TensorType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case Q4_0:
		return "Q4_0"
	case Q4_1:
		return "Q4_1"
	case Q8_0:
		return "Q8_0"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// Quantized reports whether t is a block-quantized type.
func (t TensorType) Quantized() bool { return t == Q4_0 || t == Q4_1 || t == Q8_0 }

// fileType is the general.file_type value (enum llama_ftype) for a model
// whose matrices are of type t.
func (t TensorType) fileType() uint32 {
	switch t {
	case F32:
		return 0
	case F16:
		return 1
	case Q4_0:
		return 2
	case Q4_1:
		return 3
	case Q8_0:
		return 7
	case BF16:
		return 32
	}
	return 0
}

// rowBytes is the encoded size of one row of n values.
func (t TensorType) rowBytes(n int) int {
	switch t {
	case F32:
		return 4 * n
	case F16, BF16:
		return 2 * n
	case Q4_0:
		return n / QK * 18
	case Q4_1:
		return n / QK * 20
	case Q8_0:
		return n / QK * 34
	}
	panic("testmodel: unknown tensor type")
}

// Encode encodes row-major values (rows of length rowLen) as type t. For
// the block types rowLen must be a multiple of QK.
func Encode(t TensorType, x []float32, rowLen int) ([]byte, error) {
	if rowLen <= 0 || len(x)%rowLen != 0 {
		return nil, fmt.Errorf("encode %s: %d values are not rows of %d", t, len(x), rowLen)
	}
	if t.Quantized() && rowLen%QK != 0 {
		return nil, fmt.Errorf("encode %s: row length %d is not a multiple of %d", t, rowLen, QK)
	}
	out := make([]byte, 0, t.rowBytes(rowLen)*(len(x)/rowLen))
	switch t {
	case F32:
		for _, v := range x {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	case F16:
		for _, v := range x {
			out = binary.LittleEndian.AppendUint16(out, f32ToF16(v))
		}
	case BF16:
		for _, v := range x {
			out = binary.LittleEndian.AppendUint16(out, f32ToBF16(v))
		}
	case Q8_0:
		for i := 0; i < len(x); i += QK {
			out = appendQ8_0(out, x[i:i+QK])
		}
	case Q4_0:
		for i := 0; i < len(x); i += QK {
			out = appendQ4_0(out, x[i:i+QK])
		}
	case Q4_1:
		for i := 0; i < len(x); i += QK {
			d, m, q := quantizeQ4_1(x[i : i+QK])
			out = binary.LittleEndian.AppendUint16(out, d)
			out = binary.LittleEndian.AppendUint16(out, m)
			out = append(out, packNibbles(q)...)
		}
	default:
		return nil, fmt.Errorf("encode: unsupported tensor type %s", t)
	}
	return out, nil
}

// Decode is the inverse of Encode: it returns the values a reader of type t
// data computes (the dequantized weights for the block types).
func Decode(t TensorType, b []byte, n int) ([]float32, error) {
	if !t.Quantized() && t != F32 && t != F16 && t != BF16 {
		return nil, fmt.Errorf("decode: unsupported tensor type %s", t)
	}
	if t.Quantized() && n%QK != 0 || len(b) != t.rowBytes(n) {
		return nil, fmt.Errorf("decode %s: %d bytes do not hold %d values", t, len(b), n)
	}
	out := make([]float32, n)
	le := binary.LittleEndian
	switch t {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = f16ToF32(le.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = bf16ToF32(le.Uint16(b[2*i:]))
		}
	case Q8_0:
		for blk := 0; blk < n/QK; blk++ {
			p := b[blk*34:]
			d := f16ToF32(le.Uint16(p))
			for j := 0; j < QK; j++ {
				out[blk*QK+j] = float32(int8(p[2+j])) * d
			}
		}
	case Q4_0:
		for blk := 0; blk < n/QK; blk++ {
			p := b[blk*18:]
			d := f16ToF32(le.Uint16(p))
			for j := 0; j < QK/2; j++ {
				out[blk*QK+j] = float32(int(p[2+j]&0x0f)-8) * d
				out[blk*QK+j+QK/2] = float32(int(p[2+j]>>4)-8) * d
			}
		}
	case Q4_1:
		for blk := 0; blk < n/QK; blk++ {
			p := b[blk*20:]
			d := f16ToF32(le.Uint16(p))
			m := f16ToF32(le.Uint16(p[2:]))
			for j := 0; j < QK/2; j++ {
				out[blk*QK+j] = float32(p[4+j]&0x0f)*d + m
				out[blk*QK+j+QK/2] = float32(p[4+j]>>4)*d + m
			}
		}
	}
	return out, nil
}

// appendQ8_0 follows quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d).
func appendQ8_0(out []byte, x []float32) []byte {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	out = binary.LittleEndian.AppendUint16(out, f32ToF16(d))
	for _, v := range x {
		x0 := float32(v * id)
		out = append(out, byte(int8(math.Round(float64(x0)))))
	}
	return out
}

// appendQ4_0 follows quantize_row_q4_0_ref: d = max/-8 where max is the
// value of largest magnitude; q = min(15, (int8)(x/d + 8.5)); element j
// goes into the low nibble of byte j, element j+16 into its high nibble.
func appendQ4_0(out []byte, x []float32) []byte {
	var amax, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, mx = a, v
		}
	}
	d := mx / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	out = binary.LittleEndian.AppendUint16(out, f32ToF16(d))
	q := make([]uint8, QK)
	for j, v := range x {
		x0 := float32(v * id)
		q[j] = uint8(min(15, int8(float32(x0+8.5))))
	}
	return append(out, packNibbles(q)...)
}

// quantizeQ4_1 follows quantize_row_q4_1_ref: d = (max-min)/15, m = min,
// q = min(15, (int8)((x-min)/d + 0.5)). It returns d and m as float16 bits
// and the 32 unsigned nibble values in element order.
func quantizeQ4_1(x []float32) (d16, m16 uint16, q []uint8) {
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	q = make([]uint8, QK)
	for j, v := range x {
		x0 := float32(float32(v-lo) * id)
		q[j] = uint8(min(15, int8(float32(x0+0.5))))
	}
	return f32ToF16(d), f32ToF16(lo), q
}

// packNibbles packs 32 nibbles in ggml's order: byte j holds element j in
// its low nibble and element j+16 in its high nibble.
func packNibbles(q []uint8) []byte {
	b := make([]byte, QK/2)
	for j := range b {
		b[j] = q[j]&0x0f | q[j+QK/2]<<4
	}
	return b
}
