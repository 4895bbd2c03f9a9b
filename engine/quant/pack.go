package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/npuchat/npuchat/engine/simd"
)

// GroupRows is how many weight rows a Packed matrix interleaves: one
// 512-bit register holds one 32-bit lane per row.
const GroupRows = 16

// Packed is a Q8_0, Q4_0, Q4_1 or Q4_1BF16 matrix rearranged for the
// AVX-512 VNNI matrix kernels (as llama.cpp repacks Q4_0 into
// interleaved rows): its rows are taken 16 at a time (a group; the last
// one padded with zero rows), and a group stores, block after block,
//
//   - the 16 rows' scales d (float16, or bfloat16 for Q4_1BF16), then for
//     Q4_1 their minimums m, 32 bytes each;
//   - the block's 16×32 weights such that 64 consecutive bytes (Q8_0), or
//     the low and then the high nibbles of 64 consecutive bytes (Q4), are
//     one register whose 32-bit lane r holds four consecutive weights of
//     row r: lane r of register k holds weights 4k..4k+3.
//
// Q4 nibbles are stored unsigned (0..15), Q8_0 weights as w+128 (0..255):
// VPDPBUSD multiplies unsigned by signed bytes, and the offsets are taken
// out again with the activations' block sums (Q8Vector.Sum), exactly.
// A Packed matrix holds as many bytes as the rows it was made from (plus
// the padding rows).
type Packed struct {
	Type       Type
	Rows, Cols int
	Data       []byte
	blockBytes int // bytes per block of one group
}

// CanPack reports whether Pack takes a matrix of type t with cols columns.
func CanPack(t Type, cols int) bool {
	return cols > 0 && cols%32 == 0 && packedBlockBytes(t) > 0
}

func packedBlockBytes(t Type) int {
	switch t {
	case Q4_0:
		return 32 + 256
	case Q4_1, Q4_1BF16:
		return 64 + 256
	case Q8_0:
		return 32 + 512
	}
	return 0
}

// Groups is the number of 16-row groups.
func (p *Packed) Groups() int { return (p.Rows + GroupRows - 1) / GroupRows }

// group returns group g's bytes.
func (p *Packed) group(g int) []byte {
	gb := p.blockBytes * (p.Cols / 32)
	return p.Data[g*gb : (g+1)*gb]
}

// PackedBytes is the size of Pack's result for a rows×cols matrix of type t.
func PackedBytes(t Type, rows, cols int) int {
	return (rows + GroupRows - 1) / GroupRows * packedBlockBytes(t) * (cols / 32)
}

// Packer is the level whose packing kernel Pack runs at level l: the
// avx512 packer at avx512, the avx2 one at avxvnni and avx2 (avxvnni has
// no packer of its own; the bytes are the same whichever runs), plain
// Go (packGroup) at none.
func Packer(l simd.Level) simd.Level {
	switch {
	case l >= simd.AVX512:
		return simd.AVX512
	case l >= simd.AVX2:
		return simd.AVX2
	}
	return simd.None
}

// Pack rearranges a rows×cols matrix of type t (CanPack), stored as
// ggml rows in data, into dst (PackedBytes long, or nil to allocate),
// with level l's packer (Packer(l); the CPU must have l: simd.Resolve).
// Groups [g0, g1) only are written when g1 > 0, so that several
// goroutines can pack parts of one matrix. It returns the highest level
// whose packer wrote a group: Packer(l), or lower where that packer
// does not take a group (the avx2 packer takes full groups only, so a
// last partial group is packed in plain Go; a matrix of fewer than 16
// rows packs in plain Go at avx2). Every packer writes the same bytes.
func Pack(l simd.Level, t Type, rows, cols int, data, dst []byte, g0, g1 int) (*Packed, simd.Level, error) {
	if !CanPack(t, cols) {
		return nil, simd.None, fmt.Errorf("cannot pack a %s matrix of %d columns", t, cols)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, simd.None, err
	}
	if len(data) != rows*rb {
		return nil, simd.None, fmt.Errorf("%d bytes of %s data for a %d×%d matrix, want %d", len(data), t, rows, cols, rows*rb)
	}
	n := PackedBytes(t, rows, cols)
	if dst == nil {
		dst = make([]byte, n)
	}
	if len(dst) != n {
		return nil, simd.None, fmt.Errorf("pack into %d bytes, want %d", len(dst), n)
	}
	mustHave("Pack", l)
	p := &Packed{Type: t, Rows: rows, Cols: cols, Data: dst, blockBytes: packedBlockBytes(t)}
	if g1 <= 0 {
		g0, g1 = 0, p.Groups()
	}
	used := simd.None
	packer := Packer(l)
	for g := g0; g < g1; g++ {
		switch {
		case packer == simd.AVX512 && packGroupAVX512(p, g, data, rb):
			used = max(used, simd.AVX512)
		case packer >= simd.AVX2 && packGroupAVX2(p, g, data, rb):
			used = max(used, simd.AVX2)
		default:
			p.packGroup(g, data, rb)
		}
	}
	return p, used, nil
}

// packGroup writes group g of p from the ggml rows in data (rb bytes
// each). It is the reference the assembly packers (packGroupAVX512,
// packGroupAVX2) are checked against, and what level none runs.
func (p *Packed) packGroup(g int, data []byte, rb int) {
	nb := p.Cols / 32
	bb := p.Type.BlockBytes()
	dst := p.group(g)
	le := binary.LittleEndian
	const lo4 = 0x0F0F0F0F
	partial := (g+1)*GroupRows > p.Rows
	for b := range nb {
		out := dst[b*p.blockBytes : (b+1)*p.blockBytes]
		if partial {
			clear(out) // padding rows: zero scales and weights
		}
		w := out[p.blockBytes-256:]
		if p.Type == Q8_0 {
			w = out[32:]
		}
		for r := range GroupRows {
			row := g*GroupRows + r
			if row >= p.Rows {
				break // padding: zero scales and weights
			}
			blk := data[row*rb+b*bb : row*rb+(b+1)*bb]
			out[2*r], out[2*r+1] = blk[0], blk[1] // d
			switch p.Type {
			case Q8_0:
				for k := range 8 {
					// int8 w → w+128: flip each byte's top bit
					le.PutUint32(w[64*k+4*r:], le.Uint32(blk[2+4*k:])^0x80808080)
				}
				continue
			case Q4_1, Q4_1BF16:
				out[32+2*r], out[32+2*r+1] = blk[2], blk[3] // m
				blk = blk[2:]
			}
			// ggml: byte j holds value j (low nibble) and j+16 (high);
			// packed register c holds values 8c..8c+3 (low nibbles of
			// its lane r) with 8c+4..8c+7 (high), for c < 2; and the
			// values 16 on for c = 2, 3.
			a, bq, c, d := le.Uint32(blk[2:]), le.Uint32(blk[6:]), le.Uint32(blk[10:]), le.Uint32(blk[14:])
			le.PutUint32(w[4*r:], a&lo4|(bq&lo4)<<4)
			le.PutUint32(w[64+4*r:], c&lo4|(d&lo4)<<4)
			le.PutUint32(w[128+4*r:], a>>4&lo4|bq&^lo4)
			le.PutUint32(w[192+4*r:], c>>4&lo4|d&^lo4)
		}
	}
}

// TileLen is the length of the out buffer MulQ8 needs for n vectors.
func (p *Packed) TileLen(n int) int {
	if p.Type == Q4_1 || p.Type == Q4_1BF16 {
		return 2 * n * GroupRows
	}
	return n * GroupRows
}

// packedFunc is the signature of the assembly kernels: w is a group's
// packed blocks, qs/d/sum/s vector 0's arrays (qstride bytes and dstride
// bytes to the next vector's), out ntok×16 accumulators (×2 for Q4_1).
type packedFunc func(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)

// packedFuncs[level][packedIndex(type)] is level's many-vector kernel
// and one-vector (decode) kernel, whose accumulators stay in registers.
// A level without kernels here (none) does not pack: its products read
// the rows as stored. Giving a level a packed kernel family is a row
// here; the engine packs at load for every level that has one
// (HasPackedKernel).
var packedFuncs = [simd.NumLevels]*[4][2]packedFunc{
	simd.AVX2: &avx2PackedFuncs,
	simd.AVXVNNI: {
		{gemmQ4_0AVXVNNI, gemmQ4_0AVXVNNIx1},
		{gemmQ4_1AVXVNNI, gemmQ4_1AVXVNNIx1},
		{gemmQ4_1BF16AVXVNNI, gemmQ4_1BF16AVXVNNIx1},
		{gemmQ8_0AVXVNNI, gemmQ8_0AVXVNNIx1},
	},
	simd.AVX512: {
		{gemmQ4_0VNNI, gemmQ4_0VNNIx1},
		{gemmQ4_1VNNI, gemmQ4_1VNNIx1},
		{gemmQ4_1BF16VNNI, gemmQ4_1BF16VNNIx1},
		{gemmQ8_0VNNI, gemmQ8_0VNNIx1},
	},
}

// HasPackedKernel reports whether level l multiplies packed matrices of
// type t by 8-bit activations with kernels of its own (Packed.MulQ8):
// whether the engine packs such matrices at load at that level.
func HasPackedKernel(l simd.Level, t Type) bool {
	return l >= 0 && int(l) < simd.NumLevels && packedFuncs[l] != nil && packedBlockBytes(t) > 0 && packedFuncs[l][packedIndex(t)][0] != nil
}

// packedIndex is t's row in packedFuncs.
func packedIndex(t Type) int {
	switch t {
	case Q4_0:
		return 0
	case Q4_1:
		return 1
	case Q4_1BF16:
		return 2
	}
	return 3 // Q8_0
}

// MulQ8 sets out[t*16+r] = row (16g+r) · b.Vecs[first+t] for r < 16 and
// t < n: one group of rows times n vectors, each weight block unpacked
// once for all of them; out is TileLen(n) long (the rest is scratch).
// Rows past Rows (padding) give 0. Each result is computed in exactly
// DotQ8Ref's order (block by block, no fused multiply-add), so it equals
// DotQ8Ref of the original row bit for bit, whichever kernel runs and
// however many vectors are taken at once. l chooses the kernels: level
// l's (the CPU must have it: simd.Resolve), or the plain-Go twin where l
// has none (HasPackedKernel).
func (p *Packed) MulQ8(l simd.Level, g int, b *Q8Batch, first, n int, out []float32) {
	nb := p.Cols / 32
	if len(b.Vecs) < first+n || len(b.Vecs[first].D) != nb || len(out) < p.TileLen(n) {
		panic(fmt.Sprintf("quant.Packed.MulQ8: %d vectors of %d blocks from %d (want %d of %d), %d outputs", len(b.Vecs), len(b.Vecs[first].D), first, n, nb, len(out)))
	}
	mustHave("Packed.MulQ8", l)
	if !HasPackedKernel(l, p.Type) {
		p.mulQ8Ref(g, b, first, n, out)
		return
	}
	p.mulQ8Asm(&packedFuncs[l][packedIndex(p.Type)], g, b, first, n, out)
}

// mulQ8Ref is MulQ8's plain-Go twin, reading the packed layout.
func (p *Packed) mulQ8Ref(g int, b *Q8Batch, first, n int, out []float32) {
	nb := p.Cols / 32
	w := p.group(g)
	half := func(h []byte) float32 {
		if p.Type == Q4_1BF16 {
			return BF16ToF32(binary.LittleEndian.Uint16(h))
		}
		return F16ToF32(binary.LittleEndian.Uint16(h))
	}
	for t := range n {
		x := &b.Vecs[first+t]
		for r := range GroupRows {
			var acc, mins float32
			for blk := range nb {
				bw := w[blk*p.blockBytes : (blk+1)*p.blockBytes]
				q := x.Qs[blk*32 : blk*32+32]
				d := half(bw[2*r:])
				var s int32
				switch p.Type {
				case Q8_0:
					for k := range 8 {
						for i := range 4 {
							s += int32(bw[32+64*k+4*r+i]) * int32(q[4*k+i])
						}
					}
					s -= 128 * x.Sum[blk]
				default:
					qw := bw[p.blockBytes-256:]
					for c := range 4 {
						for i := range 4 {
							by := qw[64*c+4*r+i]
							s += int32(by&0x0f)*int32(q[8*c+i]) + int32(by>>4)*int32(q[8*c+4+i])
						}
					}
					if p.Type == Q4_0 {
						s -= 8 * x.Sum[blk]
					}
				}
				acc = float32(acc + float32(float32(d*x.D[blk])*float32(s)))
				if p.Type == Q4_1 || p.Type == Q4_1BF16 {
					mins = float32(mins + float32(half(bw[32+2*r:])*x.S[blk]))
				}
			}
			out[t*GroupRows+r] = acc + mins
		}
	}
}

// GroupBytes is the size of one 16-row group.
func (p *Packed) GroupBytes() int { return p.blockBytes * (p.Cols / 32) }

// NewPacked wraps data already in the packed layout (a cache file's
// bytes, or groups cut from another Packed) as a rows×cols matrix.
func NewPacked(t Type, rows, cols int, data []byte) (*Packed, error) {
	if !CanPack(t, cols) || rows <= 0 {
		return nil, fmt.Errorf("no packed layout for a %d×%d %s matrix", rows, cols, t)
	}
	if n := PackedBytes(t, rows, cols); len(data) != n {
		return nil, fmt.Errorf("%d bytes of packed %s data for a %d×%d matrix, want %d", len(data), t, rows, cols, n)
	}
	return &Packed{Type: t, Rows: rows, Cols: cols, Data: data, blockBytes: packedBlockBytes(t)}, nil
}
