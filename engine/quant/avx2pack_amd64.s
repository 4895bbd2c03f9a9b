// AVX2 kernels for Packed matrices (pack.go), for CPUs with AVX2, FMA
// and F16C but neither AVX-512 nor AVX-VNNI (Intel Haswell to Comet Lake,
// AMD Zen 1 to Zen 3): one group of 16 weight rows times ntok Q8
// activation vectors, on the packed layout the AVX-512 and AVX-VNNI
// kernels read. As in avxvnni_amd64.s a 64-byte register row of the
// layout is two ymm halves (bytes 0-31 rows 0-7, bytes 32-63 rows 8-15;
// lane r of half h is row 8h+r), and the float16 scales (Q4_1 minimums)
// of rows 0-7 are the first 16 bytes of their 32, those of rows 8-15 the
// next 16.
//
// Without VNNI a 4-byte dot product per lane is VPMADDUBSW (unsigned ×
// signed bytes → the two pair sums of a lane as int16) and VPMADDWD with
// int16 ones (→ the lane's int32). VPMADDUBSW saturates its pair sums at
// ±32767, so:
//
//   - Q4: the unsigned nibbles (0..15) times activation bytes (|q| ≤ 127:
//     Q8Vector rounds to ±127, never -128) give pair sums of at most
//     2·15·127 = 3810, so the int16 results of a block's eight
//     VPMADDUBSW are added as int16 (VPADDW: at most 30480) before one
//     VPMADDWD: exact.
//   - Q8_0: the stored bytes w+128 times q could reach 2·255·127 and
//     saturate, so the kernels take the top bit off again (VPXOR 0x80:
//     the signed weight w), multiply |w| (VPABSB; 128 for -128, fine as
//     an unsigned byte) by q with w's sign (VPSIGNB; |q| ≤ 127 negates
//     exactly), pair sums at most 2·128·127 = 32512, and widen each
//     VPMADDUBSW by VPMADDWD before adding (two pair sums could exceed
//     int16). The integer sum is then Σ w·q itself (no offset to take
//     out).
//
// DO NOT reorder the float operations: per block and row, the exact
// integer sum is converted to float, multiplied by d·dx (d times dx
// first) and added to the row's accumulator; Q4_1's minimum terms m·s
// are summed apart and added by the caller at the end. Multiplications
// and additions are separate (no FMA), so every result equals mulQ8Ref
// (and DotQ8Ref of the original row) bit for bit, as the AVX-512 and
// AVX-VNNI kernels do.
//
// The many-vector kernels (prefill) take one half at a time: its eight
// weight registers (Y0-Y7: lane r of Yk holds weights 4k..4k+3 of the
// half's row r; for Q8_0, |w|, with the signed weights in 256 bytes of
// stack) and scales (Y8, minimums Y9) are loaded once per block, then for
// each vector the activation dwords are broadcast (VPBROADCASTD, a load)
// into the eight products, the int32 sum is scaled and added to the
// vector's accumulators in out (ntok×16 float32, ×2 for Q4_1: dot sums
// then minimum sums; zeroed by the caller). The one-vector kernels
// (decode, …x1) broadcast the block's eight activation dwords once into
// Y0-Y7 and share them between the two halves; each half's integer sum
// is scaled into its accumulator (Y8, Y9; Q4_1 minimums Y14, Y15) before
// the next half starts, so that four registers are left for the
// products.
//
// Every kernel prefetches the weights 3 KB ahead of the block it reads,
// one prefetch per 64-byte line, as the other packed kernels do.
//
// Registers: SI weights, CX blocks left, DI activation bytes of this
// block (vector 0), R8 bytes between vectors' activations, DX / BX / R9
// this block's scale / Σq / Q4_1 sum of vector 0, R10 bytes between
// vectors' scales; per vector R12, R13 offsets, AX accumulators, R11
// vectors left.

#include "textflag.h"

DATA avx2nib<>+0(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA avx2nib<>+8(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA avx2nib<>+16(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA avx2nib<>+24(SB)/8, $0x0F0F0F0F0F0F0F0F
GLOBL avx2nib<>(SB), RODATA|NOPTR, $32

DATA avx2ones<>+0(SB)/8, $0x0001000100010001
DATA avx2ones<>+8(SB)/8, $0x0001000100010001
DATA avx2ones<>+16(SB)/8, $0x0001000100010001
DATA avx2ones<>+24(SB)/8, $0x0001000100010001
GLOBL avx2ones<>(SB), RODATA|NOPTR, $32

DATA avx2top<>+0(SB)/8, $0x8080808080808080
DATA avx2top<>+8(SB)/8, $0x8080808080808080
DATA avx2top<>+16(SB)/8, $0x8080808080808080
DATA avx2top<>+24(SB)/8, $0x8080808080808080
GLOBL avx2top<>(SB), RODATA|NOPTR, $32

#define ARGS \
	MOVQ w+0(FP), SI; MOVQ nb+8(FP), CX; MOVQ qs+16(FP), DI; MOVQ qstride+24(FP), R8; \
	MOVQ d+32(FP), DX; MOVQ sum+40(FP), BX; MOVQ s+48(FP), R9; MOVQ dstride+56(FP), R10

#define PF5 \
	PREFETCHT0 3072(SI); PREFETCHT0 3136(SI); PREFETCHT0 3200(SI); PREFETCHT0 3264(SI); PREFETCHT0 3328(SI)
#define PF9 \
	PF5; PREFETCHT0 3392(SI); PREFETCHT0 3456(SI); PREFETCHT0 3520(SI); PREFETCHT0 3584(SI)

#define BF16Y(addr, y) \
	VPMOVZXWD addr, y; VPSLLD $16, y, y

// NIB2 unpacks the 32 bytes at addr into low nibbles ylo and high nibbles
// yhi (nibble mask in Y14).
#define NIB2(addr, ylo, yhi) \
	VMOVDQU addr, ylo; VPSRLW $4, ylo, yhi; VPAND Y14, ylo, ylo; VPAND Y14, yhi, yhi

// Q4WY loads one half of a Q4 block's weights (the 32-byte halves at o,
// o+64, o+128, o+192) into Y0-Y7.
#define Q4WY(o) \
	NIB2(o(SI), Y0, Y1); NIB2(o+64(SI), Y2, Y3); NIB2(o+128(SI), Y4, Y5); NIB2(o+192(SI), Y6, Y7)

// Q8K loads register k of one half of a Q8_0 block (32 bytes at addr):
// the signed weights to the stack, their magnitudes into yk (Y14 = 0x80).
#define Q8K(addr, k, yk) \
	VPXOR addr, Y14, Y10; VMOVDQU Y10, (32*(k))(SP); VPABSB Y10, yk

#define Q8WY(o) \
	Q8K(o(SI), 0, Y0); Q8K(o+64(SI), 1, Y1); Q8K(o+128(SI), 2, Y2); Q8K(o+192(SI), 3, Y3); \
	Q8K(o+256(SI), 4, Y4); Q8K(o+320(SI), 5, Y5); Q8K(o+384(SI), 6, Y6); Q8K(o+448(SI), 7, Y7)

// DPQ4 sets Y10 to the int32 dot products of the nibbles in Y0-Y7 with
// the 32 activation bytes of the current vector (Y15 int16 ones).
#define DPQ4 \
	VPBROADCASTD (DI)(R12*1), Y12; VPMADDUBSW Y12, Y0, Y10; \
	VPBROADCASTD 4(DI)(R12*1), Y13; VPMADDUBSW Y13, Y1, Y11; \
	VPBROADCASTD 8(DI)(R12*1), Y12; VPMADDUBSW Y12, Y2, Y12; VPADDW Y12, Y10, Y10; \
	VPBROADCASTD 12(DI)(R12*1), Y13; VPMADDUBSW Y13, Y3, Y13; VPADDW Y13, Y11, Y11; \
	VPBROADCASTD 16(DI)(R12*1), Y12; VPMADDUBSW Y12, Y4, Y12; VPADDW Y12, Y10, Y10; \
	VPBROADCASTD 20(DI)(R12*1), Y13; VPMADDUBSW Y13, Y5, Y13; VPADDW Y13, Y11, Y11; \
	VPBROADCASTD 24(DI)(R12*1), Y12; VPMADDUBSW Y12, Y6, Y12; VPADDW Y12, Y10, Y10; \
	VPBROADCASTD 28(DI)(R12*1), Y13; VPMADDUBSW Y13, Y7, Y13; VPADDW Y13, Y11, Y11; \
	VPADDW Y11, Y10, Y10; VPMADDWD Y15, Y10, Y10

// Q8P(o, k, yk, dst) is one Q8_0 register's int32 products with the
// current vector: the activation dword at o, signed like the weights on
// the stack, times their magnitudes yk.
#define Q8P(o, k, yk, dst) \
	VPBROADCASTD o(DI)(R12*1), dst; VPSIGNB (32*(k))(SP), dst, dst; VPMADDUBSW dst, yk, dst; VPMADDWD Y15, dst, dst

// DPQ8 is DPQ4 for Q8_0: Y10 = Σ w·q per lane.
#define DPQ8 \
	Q8P(0, 0, Y0, Y10); Q8P(4, 1, Y1, Y11); \
	Q8P(8, 2, Y2, Y12); VPADDD Y12, Y10, Y10; Q8P(12, 3, Y3, Y13); VPADDD Y13, Y11, Y11; \
	Q8P(16, 4, Y4, Y12); VPADDD Y12, Y10, Y10; Q8P(20, 5, Y5, Y13); VPADDD Y13, Y11, Y11; \
	Q8P(24, 6, Y6, Y12); VPADDD Y12, Y10, Y10; Q8P(28, 7, Y7, Y13); VPADDD Y13, Y11, Y11; \
	VPADDD Y11, Y10, Y10

// OFFY(sh) takes the weights' storage offset out of Y10: Y10 -= Σq << sh
// (Q4_0: 8·Σq).
#define OFFY(sh) \
	VPBROADCASTD (BX)(R13*1), Y12; VPSLLD $sh, Y12, Y12; VPSUBD Y12, Y10, Y10

// SCALEY: Y10 = float(Y10) · (d · dx)
#define SCALEY \
	VCVTDQ2PS Y10, Y10; VBROADCASTSS (DX)(R13*1), Y12; VMULPS Y12, Y8, Y12; VMULPS Y12, Y10, Y10

// ACCY adds Y10 to the vector's accumulators (this half's 8) and steps
// to the next vector.
#define ACCY \
	VADDPS (AX), Y10, Y10; VMOVUPS Y10, (AX); \
	ADDQ R8, R12; ADDQ R10, R13; ADDQ $64, AX; DECQ R11

// ACCMINY is ACCY for Q4_1: Y10 to the accumulators, the minimum terms
// m·s to the second set 64 bytes after them.
#define ACCMINY \
	VADDPS (AX), Y10, Y10; VMOVUPS Y10, (AX); \
	VBROADCASTSS (R9)(R13*1), Y13; VMULPS Y13, Y9, Y13; VADDPS 64(AX), Y13, Y13; VMOVUPS Y13, 64(AX); \
	ADDQ R8, R12; ADDQ R10, R13; ADDQ $128, AX; DECQ R11

// TOKENS(h) starts the vector loop of half h (its accumulators 32·h
// bytes into each vector's).
#define TOKENS(h) \
	MOVQ out+72(FP), AX; ADDQ $(32*(h)), AX; MOVQ ntok+64(FP), R11; XORQ R12, R12; XORQ R13, R13

#define NEXT(bytes) \
	ADDQ $bytes, SI; ADDQ $32, DI; ADDQ $4, DX; ADDQ $4, BX; ADDQ $4, R9; DECQ CX

#define CONSTQ4 \
	VMOVDQU avx2nib<>(SB), Y14; VMOVDQU avx2ones<>(SB), Y15
#define CONSTQ8 \
	VMOVDQU avx2top<>(SB), Y14; VMOVDQU avx2ones<>(SB), Y15

// func gemmQ4_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_0AVX2(SB), NOSPLIT, $0-80
	ARGS
	CONSTQ4
gemmQ4_0AVX2block:
	PF5
	VCVTPH2PS (SI), Y8
	Q4WY(32)
	TOKENS(0)
gemmQ4_0AVX2tok0:
	DPQ4
	OFFY(3)
	SCALEY
	ACCY
	JNZ gemmQ4_0AVX2tok0
	VCVTPH2PS 16(SI), Y8
	Q4WY(64)
	TOKENS(1)
gemmQ4_0AVX2tok1:
	DPQ4
	OFFY(3)
	SCALEY
	ACCY
	JNZ gemmQ4_0AVX2tok1
	NEXT(288)
	JNZ gemmQ4_0AVX2block
	VZEROUPPER
	RET

// func gemmQ4_1AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1AVX2(SB), NOSPLIT, $0-80
	ARGS
	CONSTQ4
gemmQ4_1AVX2block:
	PF5
	VCVTPH2PS (SI), Y8
	VCVTPH2PS 32(SI), Y9
	Q4WY(64)
	TOKENS(0)
gemmQ4_1AVX2tok0:
	DPQ4
	SCALEY
	ACCMINY
	JNZ gemmQ4_1AVX2tok0
	VCVTPH2PS 16(SI), Y8
	VCVTPH2PS 48(SI), Y9
	Q4WY(96)
	TOKENS(1)
gemmQ4_1AVX2tok1:
	DPQ4
	SCALEY
	ACCMINY
	JNZ gemmQ4_1AVX2tok1
	NEXT(320)
	JNZ gemmQ4_1AVX2block
	VZEROUPPER
	RET

// func gemmQ4_1BF16AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1BF16AVX2(SB), NOSPLIT, $0-80
	ARGS
	CONSTQ4
gemmQ4_1BF16AVX2block:
	PF5
	BF16Y((SI), Y8)
	BF16Y(32(SI), Y9)
	Q4WY(64)
	TOKENS(0)
gemmQ4_1BF16AVX2tok0:
	DPQ4
	SCALEY
	ACCMINY
	JNZ gemmQ4_1BF16AVX2tok0
	BF16Y(16(SI), Y8)
	BF16Y(48(SI), Y9)
	Q4WY(96)
	TOKENS(1)
gemmQ4_1BF16AVX2tok1:
	DPQ4
	SCALEY
	ACCMINY
	JNZ gemmQ4_1BF16AVX2tok1
	NEXT(320)
	JNZ gemmQ4_1BF16AVX2block
	VZEROUPPER
	RET

// func gemmQ8_0AVX2(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (256 bytes of stack: one half-block's signed weights)
TEXT ·gemmQ8_0AVX2(SB), NOSPLIT, $256-80
	ARGS
	CONSTQ8
gemmQ8_0AVX2block:
	PF9
	VCVTPH2PS (SI), Y8
	Q8WY(32)
	TOKENS(0)
gemmQ8_0AVX2tok0:
	DPQ8
	SCALEY
	ACCY
	JNZ gemmQ8_0AVX2tok0
	VCVTPH2PS 16(SI), Y8
	Q8WY(64)
	TOKENS(1)
gemmQ8_0AVX2tok1:
	DPQ8
	SCALEY
	ACCY
	JNZ gemmQ8_0AVX2tok1
	NEXT(544)
	JNZ gemmQ8_0AVX2block
	VZEROUPPER
	RET

// The one-vector kernels. BCAST8 broadcasts the block's eight activation
// dwords into Y0-Y7.
#define BCAST8 \
	VPBROADCASTD (DI), Y0; VPBROADCASTD 4(DI), Y1; VPBROADCASTD 8(DI), Y2; VPBROADCASTD 12(DI), Y3; \
	VPBROADCASTD 16(DI), Y4; VPBROADCASTD 20(DI), Y5; VPBROADCASTD 24(DI), Y6; VPBROADCASTD 28(DI), Y7

// Q4LINE1(addr, lo, hi, a, b) multiplies the 32 bytes at addr (one half
// of a register row: low nibbles weights 4k.., high ones 4(k+1)..) by the
// activation dwords in lo and hi, into the int16 sums a and b
// (NIB1's first line sets them, the others add; nibble mask in mask).
#define Q4FIRST1(addr, lo, hi, mask) \
	VMOVDQU addr, Y12; VPSRLW $4, Y12, Y13; VPAND mask, Y12, Y12; VPAND mask, Y13, Y13; \
	VPMADDUBSW lo, Y12, Y10; VPMADDUBSW hi, Y13, Y11
#define Q4LINE1(addr, lo, hi, mask) \
	VMOVDQU addr, Y12; VPSRLW $4, Y12, Y13; VPAND mask, Y12, Y12; VPAND mask, Y13, Y13; \
	VPMADDUBSW lo, Y12, Y12; VPMADDUBSW hi, Y13, Y13; VPADDW Y12, Y10, Y10; VPADDW Y13, Y11, Y11

// Q4HALF1(o, mask, ones) leaves in Y10 the int32 sums of the half whose
// register rows start at o.
#define Q4HALF1(o, mask, ones) \
	Q4FIRST1(o(SI), Y0, Y1, mask); Q4LINE1(o+64(SI), Y2, Y3, mask); \
	Q4LINE1(o+128(SI), Y4, Y5, mask); Q4LINE1(o+192(SI), Y6, Y7, mask); \
	VPADDW Y11, Y10, Y10; VPMADDWD ones, Y10, Y10

// Q8R1(addr, yk, dst) is one Q8_0 register (32 bytes at addr) times the
// activation dword in yk as int32 (Y14 = 0x80, Y15 int16 ones).
#define Q8R1(addr, yk, dst) \
	VPXOR addr, Y14, Y12; VPABSB Y12, Y13; VPSIGNB Y12, yk, Y12; VPMADDUBSW Y12, Y13, Y12; VPMADDWD Y15, Y12, dst

// Q8HALF1(o) leaves in Y10 the int32 sums of the Q8_0 half at o.
#define Q8HALF1(o) \
	Q8R1(o(SI), Y0, Y10); Q8R1(o+64(SI), Y1, Y11); \
	Q8R1(o+128(SI), Y2, Y12); VPADDD Y12, Y10, Y10; Q8R1(o+192(SI), Y3, Y12); VPADDD Y12, Y11, Y11; \
	Q8R1(o+256(SI), Y4, Y12); VPADDD Y12, Y10, Y10; Q8R1(o+320(SI), Y5, Y12); VPADDD Y12, Y11, Y11; \
	Q8R1(o+384(SI), Y6, Y12); VPADDD Y12, Y10, Y10; Q8R1(o+448(SI), Y7, Y12); VPADDD Y12, Y11, Y11; \
	VPADDD Y11, Y10, Y10

// OFF1(sh) takes Σq << sh out of Y10.
#define OFF1(sh) \
	VPBROADCASTD (BX), Y11; VPSLLD $sh, Y11, Y11; VPSUBD Y11, Y10, Y10

// FIN1(scale, acc): acc += float(Y10) · (scale · dx), scale a load of
// 8 rows' scales as float32 into Y12 (VCVTPH2PS or BF16Y).
#define FIN1F16(addr, acc) \
	VCVTDQ2PS Y10, Y10; VBROADCASTSS (DX), Y11; VCVTPH2PS addr, Y12; VMULPS Y11, Y12, Y12; VMULPS Y12, Y10, Y10; VADDPS Y10, acc, acc
#define FIN1BF16(addr, acc) \
	VCVTDQ2PS Y10, Y10; VBROADCASTSS (DX), Y11; BF16Y(addr, Y12); VMULPS Y11, Y12, Y12; VMULPS Y12, Y10, Y10; VADDPS Y10, acc, acc

// MIN1F16(addr, acc): acc += m · s for the 8 minimums at addr.
#define MIN1F16(addr, acc) \
	VBROADCASTSS (R9), Y11; VCVTPH2PS addr, Y12; VMULPS Y11, Y12, Y12; VADDPS Y12, acc, acc
#define MIN1BF16(addr, acc) \
	VBROADCASTSS (R9), Y11; BF16Y(addr, Y12); VMULPS Y11, Y12, Y12; VADDPS Y12, acc, acc

// func gemmQ4_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ4_0AVX2x1(SB), NOSPLIT, $0-80
	ARGS
	CONSTQ4
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
gemmQ4_0AVX2x1block:
	PF5
	BCAST8
	Q4HALF1(32, Y14, Y15)
	OFF1(3)
	FIN1F16((SI), Y8)
	Q4HALF1(64, Y14, Y15)
	OFF1(3)
	FIN1F16(16(SI), Y9)
	NEXT(288)
	JNZ gemmQ4_0AVX2x1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VZEROUPPER
	RET

// func gemmQ4_1AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written; the minimums' accumulators
// take Y14 and Y15, so the constants are memory operands)
TEXT ·gemmQ4_1AVX2x1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
gemmQ4_1AVX2x1block:
	PF5
	BCAST8
	Q4HALF1(64, avx2nib<>(SB), avx2ones<>(SB))
	FIN1F16((SI), Y8)
	Q4HALF1(96, avx2nib<>(SB), avx2ones<>(SB))
	FIN1F16(16(SI), Y9)
	MIN1F16(32(SI), Y14)
	MIN1F16(48(SI), Y15)
	NEXT(320)
	JNZ gemmQ4_1AVX2x1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y14, 64(AX)
	VMOVUPS Y15, 96(AX)
	VZEROUPPER
	RET

// func gemmQ4_1BF16AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ4_1BF16AVX2x1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
gemmQ4_1BF16AVX2x1block:
	PF5
	BCAST8
	Q4HALF1(64, avx2nib<>(SB), avx2ones<>(SB))
	FIN1BF16((SI), Y8)
	Q4HALF1(96, avx2nib<>(SB), avx2ones<>(SB))
	FIN1BF16(16(SI), Y9)
	MIN1BF16(32(SI), Y14)
	MIN1BF16(48(SI), Y15)
	NEXT(320)
	JNZ gemmQ4_1BF16AVX2x1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y14, 64(AX)
	VMOVUPS Y15, 96(AX)
	VZEROUPPER
	RET

// func gemmQ8_0AVX2x1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ8_0AVX2x1(SB), NOSPLIT, $0-80
	ARGS
	CONSTQ8
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
gemmQ8_0AVX2x1block:
	PF9
	BCAST8
	Q8HALF1(32)
	FIN1F16((SI), Y8)
	Q8HALF1(64)
	FIN1F16(16(SI), Y9)
	NEXT(544)
	JNZ gemmQ8_0AVX2x1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VZEROUPPER
	RET
