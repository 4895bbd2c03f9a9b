package quant

import (
	"encoding/binary"
	"math"
)

// Dot returns Σ w[i]·x[i] where w is the row of len(x) values stored in row
// with type t. It dequantizes block by block without a temporary buffer;
// it equals dot(Dequantize(row), x) up to float32 summation order.
func Dot(t Type, row []byte, x []float32) float32 {
	switch t {
	case F32:
		return dotF32(row, x)
	case F16:
		return dotF16(row, x)
	case BF16:
		return dotBF16(row, x)
	case Q8_0:
		return dotQ8_0(row, x)
	case Q4_0:
		return dotQ4_0(row, x)
	case Q4_1, Q4_1BF16:
		return dotQ4_1(t, row, x)
	case Q4_K:
		return dotQ4K(row, x)
	case Q6_K:
		return dotQ6K(row, x)
	case Q5_0, Q5_1, Q5_K:
		return dotByBlock(t, row, x)
	}
	panic("quant.Dot: unsupported type " + t.String())
}

func dotF32(row []byte, x []float32) float32 {
	row = row[:4*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := row[4*i : 4*i+16]
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(b[0:])) * x[i]
		s1 += math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) * x[i+1]
		s2 += math.Float32frombits(binary.LittleEndian.Uint32(b[8:])) * x[i+2]
		s3 += math.Float32frombits(binary.LittleEndian.Uint32(b[12:])) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16(row []byte, x []float32) float32 {
	row = row[:2*len(x)]
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += F16ToF32(le16(row[2*i:])) * x[i]
		s1 += F16ToF32(le16(row[2*i+2:])) * x[i+1]
	}
	for ; i < len(x); i++ {
		s0 += F16ToF32(le16(row[2*i:])) * x[i]
	}
	return s0 + s1
}

func dotBF16(row []byte, x []float32) float32 {
	row = row[:2*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := row[2*i : 2*i+8]
		s0 += math.Float32frombits(uint32(le16(b[0:]))<<16) * x[i]
		s1 += math.Float32frombits(uint32(le16(b[2:]))<<16) * x[i+1]
		s2 += math.Float32frombits(uint32(le16(b[4:]))<<16) * x[i+2]
		s3 += math.Float32frombits(uint32(le16(b[6:]))<<16) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += math.Float32frombits(uint32(le16(row[2*i:]))<<16) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ8_0(row []byte, x []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/32; b++ {
		blk := row[b*34 : b*34+34]
		xs := x[b*32 : b*32+32]
		q := blk[2:34]
		var s0, s1, s2, s3 float32
		for j := 0; j < 32; j += 4 {
			s0 += float32(int8(q[j])) * xs[j]
			s1 += float32(int8(q[j+1])) * xs[j+1]
			s2 += float32(int8(q[j+2])) * xs[j+2]
			s3 += float32(int8(q[j+3])) * xs[j+3]
		}
		sum += F16ToF32(le16(blk)) * ((s0 + s1) + (s2 + s3))
	}
	return sum
}

func dotQ4_0(row []byte, x []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/32; b++ {
		blk := row[b*18 : b*18+18]
		xs := x[b*32 : b*32+32]
		q := blk[2:18]
		var s0, s1 float32
		for j := 0; j < 16; j++ {
			s0 += float32(int(q[j]&0x0f)-8) * xs[j]
			s1 += float32(int(q[j]>>4)-8) * xs[j+16]
		}
		sum += F16ToF32(le16(blk)) * (s0 + s1)
	}
	return sum
}

// BlockSums sets sums[b] = Σ x[32b:32b+32], which DotSums reuses across
// the rows of a matrix-vector product for the types with a per-block min.
func BlockSums(x []float32, sums []float32) {
	for b := range sums {
		sums[b] = dotSum(x[b*32 : b*32+32])
	}
}

func dotSum(x []float32) float32 {
	var s0, s1 float32
	for j := 0; j < len(x); j += 2 {
		s0 += x[j]
		s1 += x[j+1]
	}
	return s0 + s1
}

// DotSums is Dot with the 32-value block sums of x precomputed
// (BlockSums); it saves the min terms' additions for Q4_1, Q4_1BF16 and
// Q4_K and equals Dot otherwise.
func DotSums(t Type, row []byte, x, sums []float32) float32 {
	switch t {
	case Q4_1, Q4_1BF16:
		return dotQ4_1Sums(t, row, x, sums)
	case Q4_K:
		return dotQ4KSums(row, x, sums)
	}
	return Dot(t, row, x)
}

func dotQ4_1Sums(t Type, row []byte, x, sums []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/32; b++ {
		blk := row[b*20 : b*20+20]
		xs := x[b*32 : b*32+32]
		q := blk[4:20]
		var s0, s1, s2, s3 float32
		for j := 0; j < 16; j += 2 {
			s0 += float32(q[j]&0x0f) * xs[j]
			s1 += float32(q[j]>>4) * xs[j+16]
			s2 += float32(q[j+1]&0x0f) * xs[j+1]
			s3 += float32(q[j+1]>>4) * xs[j+17]
		}
		d, m := q41Scales(t, blk)
		sum += d*((s0+s1)+(s2+s3)) + m*sums[b]
	}
	return sum
}

func dotQ4KSums(row []byte, x, sums []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/256; b++ {
		blk := row[b*144 : b*144+144]
		xs := x[b*256 : b*256+256]
		d := F16ToF32(le16(blk))
		dmin := F16ToF32(le16(blk[2:]))
		scales := blk[4:16]
		q := blk[16:144]
		for k := 0; k < 4; k++ {
			sc1, m1 := scaleMinK4(2*k, scales)
			sc2, m2 := scaleMinK4(2*k+1, scales)
			qq := q[32*k : 32*k+32]
			xa := xs[64*k : 64*k+32]
			xb := xs[64*k+32 : 64*k+64]
			var qa, qb float32
			for l := 0; l < 32; l++ {
				qa += float32(qq[l]&0x0f) * xa[l]
				qb += float32(qq[l]>>4) * xb[l]
			}
			sb := sums[b*8+2*k : b*8+2*k+2]
			sum += d*float32(sc1)*qa - dmin*float32(m1)*sb[0]
			sum += d*float32(sc2)*qb - dmin*float32(m2)*sb[1]
		}
	}
	return sum
}

// dotQ4_1 uses Σ(d·q+m)·x = d·Σq·x + m·Σx.
func dotQ4_1(t Type, row []byte, x []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/32; b++ {
		blk := row[b*20 : b*20+20]
		xs := x[b*32 : b*32+32]
		q := blk[4:20]
		var s0, s1, sx0, sx1 float32
		for j := 0; j < 16; j++ {
			s0 += float32(q[j]&0x0f) * xs[j]
			s1 += float32(q[j]>>4) * xs[j+16]
			sx0 += xs[j]
			sx1 += xs[j+16]
		}
		d, m := q41Scales(t, blk)
		sum += d*(s0+s1) + m*(sx0+sx1)
	}
	return sum
}

func dotQ4K(row []byte, x []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/256; b++ {
		blk := row[b*144 : b*144+144]
		xs := x[b*256 : b*256+256]
		d := F16ToF32(le16(blk))
		dmin := F16ToF32(le16(blk[2:]))
		scales := blk[4:16]
		q := blk[16:144]
		for k := 0; k < 4; k++ { // four 64-value groups, two sub-blocks each
			sc1, m1 := scaleMinK4(2*k, scales)
			sc2, m2 := scaleMinK4(2*k+1, scales)
			qq := q[32*k : 32*k+32]
			xa := xs[64*k : 64*k+32]
			xb := xs[64*k+32 : 64*k+64]
			var qa, qb, sa, sb float32
			for l := 0; l < 32; l++ {
				qa += float32(qq[l]&0x0f) * xa[l]
				qb += float32(qq[l]>>4) * xb[l]
				sa += xa[l]
				sb += xb[l]
			}
			sum += d*float32(sc1)*qa - dmin*float32(m1)*sa
			sum += d*float32(sc2)*qb - dmin*float32(m2)*sb
		}
	}
	return sum
}

func dotQ6K(row []byte, x []float32) float32 {
	var sum float32
	for b := 0; b < len(x)/256; b++ {
		blk := row[b*210 : b*210+210]
		xs := x[b*256 : b*256+256]
		d := F16ToF32(le16(blk[208:]))
		for h := 0; h < 2; h++ { // two halves of 128 values
			ql := blk[64*h : 64*h+64]
			qh := blk[128+32*h : 128+32*h+32]
			sc := blk[192+8*h : 192+8*h+8]
			y := xs[128*h : 128*h+128]
			var acc [8]float32 // per 16-value sub-block
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := float32(int((ql[l]&0x0f)|(qh[l]&3)<<4) - 32)
				q2 := float32(int((ql[l+32]&0x0f)|((qh[l]>>2)&3)<<4) - 32)
				q3 := float32(int((ql[l]>>4)|((qh[l]>>4)&3)<<4) - 32)
				q4 := float32(int((ql[l+32]>>4)|((qh[l]>>6)&3)<<4) - 32)
				acc[is] += q1 * y[l]
				acc[is+2] += q2 * y[l+32]
				acc[is+4] += q3 * y[l+64]
				acc[is+6] += q4 * y[l+96]
			}
			for i := 0; i < 8; i++ {
				sum += d * float32(int8(sc[i])) * acc[i]
			}
		}
	}
	return sum
}

// dotByBlock dequantizes one block at a time into a stack buffer; the
// types that use it are rare in the models the engine targets.
func dotByBlock(t Type, row []byte, x []float32) float32 {
	var buf [256]float32
	bs, bb := t.BlockSize(), t.BlockBytes()
	var sum float32
	for b := 0; b < len(x)/bs; b++ {
		y := buf[:bs]
		Dequantize(t, row[b*bb:(b+1)*bb], y)
		sum += dotF32s(y, x[b*bs:(b+1)*bs])
	}
	return sum
}

func dotF32s(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for i := 0; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	return (s0 + s1) + (s2 + s3)
}
