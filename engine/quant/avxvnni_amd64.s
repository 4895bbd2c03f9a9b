// AVX-VNNI kernels for Packed matrices (pack.go), for CPUs that have the
// VEX-encoded 256-bit VPDPBUSD but no AVX-512 (Intel Alder Lake and
// later client cores, AMD Zen 5): one group of 16 weight rows times ntok
// Q8 activation vectors, on the same packed layout as the AVX-512 kernels
// of vnni_amd64.s. A 64-byte register row of the layout is two ymm
// halves: bytes 0-31 are rows 0-7, bytes 32-63 rows 8-15 (lane r of half
// h is row 8h+r). The float16 scales (and Q4_1 minimums) of rows 0-7 are
// the first 16 bytes of their 32, those of rows 8-15 the next 16.
//
// DO NOT reorder the float operations: per block and row, the exact
// integer sum is converted to float, multiplied by d·dx (d times dx
// first) and added to the row's accumulator; Q4_1's minimum terms m·s
// are summed apart and added by the caller at the end. Multiplications
// and additions are separate (no FMA), so every result equals mulQ8Ref
// (and DotQ8Ref of the original row) bit for bit, as the AVX-512 kernels
// do. The integer sums wrap exactly as Go's int32 arithmetic does.
//
// The many-vector kernels (prefill) take one half at a time: its eight
// weight registers (Y0-Y7: lane r of Yk holds weights 4k..4k+3 of the
// half's row r) and scales (Y8, minimums Y9) are loaded once per block,
// then for each vector the activation dwords are broadcast (VPBROADCASTD,
// a load) and fed to eight VPDPBUSD in two chains (Y10, Y11), scaled
// and added to the vector's accumulators in out (ntok×16 float32, ×2 for
// Q4_1: dot sums then minimum sums; zeroed by the caller). With 16 ymm
// registers the two halves' 16 weight registers cannot stay loaded
// together, so the broadcasts are repeated for the second half: they are
// plain loads, cheaper than reloading and unpacking the weights per
// vector would be. The one-vector kernels (decode, …x1) broadcast the
// block's eight activation dwords once into Y0-Y7 and share them between
// the two halves, whose integer sums run in two chains (Y12, Y15); the
// accumulators stay in registers (Y8, Y9; Q4_1 minimums Y10, Y11).
//
// Every kernel prefetches the weights 3 KB ahead of the block it reads,
// one prefetch per 64-byte line, as the AVX-512 kernels do.
//
// Registers: SI weights, CX blocks left, DI activation bytes of this
// block (vector 0), R8 bytes between vectors' activations, DX / BX / R9
// this block's scale / Σq / Q4_1 sum of vector 0, R10 bytes between
// vectors' scales; per vector R12, R13 offsets, AX accumulators, R11
// vectors left.

#include "textflag.h"

// VPDPBUSDY(acc, u, s) is VPDPBUSD Ys, Yu, Yacc in its VEX form (AVX-VNNI;
// the Go assembler knows only the EVEX form, which needs AVX-512VL):
// each dword lane of Yacc += the four products of the unsigned bytes of
// Yu by the signed bytes of Ys in that lane, without saturation. The
// arguments are register numbers 0-15. Encoding: VEX.256.66.0F38.W0 50 /r
// (VPDPBUSD ymm1, ymm2, ymm3/m256; ymm1 = acc in ModRM.reg, ymm2 = u in
// VEX.vvvv, ymm3 = s in ModRM.rm): C4, then R̄ X̄ B̄ 00010 (R̄ and B̄ the
// inverted top bits of acc and s), then W=0 v̄v̄v̄v̄ (u inverted) L=1 pp=01,
// then 0x50 and ModRM 11 acc s. Checked by disassembling the test binary
// (go test -c; binutils objdump -d decodes all 128 uses in this file as
// "{vex} vpdpbusd" with the intended registers, e.g. "{vex} vpdpbusd
// %ymm12,%ymm0,%ymm10" for VPDPBUSDY(10, 0, 12); go tool objdump does not
// know the VEX form and shows "?").
#define VPDPBUSDY(acc, u, s) \
	BYTE $0xC4; BYTE $(((1-((acc)>>3))<<7)|0x40|((1-((s)>>3))<<5)|0x02); \
	BYTE $((((15-(u))&15)<<3)|0x05); BYTE $0x50; BYTE $(0xC0|(((acc)&7)<<3)|((s)&7))

// nibmask is 32 bytes of 0x0F (a memory operand: no register to spare).
DATA nibmask<>+0(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA nibmask<>+8(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA nibmask<>+16(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA nibmask<>+24(SB)/8, $0x0F0F0F0F0F0F0F0F
GLOBL nibmask<>(SB), RODATA|NOPTR, $32

// hinibmask is 32 bytes of 0xF0 (the one-vector Q4_0 kernel).
DATA hinibmask<>+0(SB)/8, $0xF0F0F0F0F0F0F0F0
DATA hinibmask<>+8(SB)/8, $0xF0F0F0F0F0F0F0F0
DATA hinibmask<>+16(SB)/8, $0xF0F0F0F0F0F0F0F0
DATA hinibmask<>+24(SB)/8, $0xF0F0F0F0F0F0F0F0
GLOBL hinibmask<>(SB), RODATA|NOPTR, $32

#define ARGS \
	MOVQ w+0(FP), SI; MOVQ nb+8(FP), CX; MOVQ qs+16(FP), DI; MOVQ qstride+24(FP), R8; \
	MOVQ d+32(FP), DX; MOVQ sum+40(FP), BX; MOVQ s+48(FP), R9; MOVQ dstride+56(FP), R10

// PF5 prefetches the 5 lines 3 KB past SI (a Q4_0 or Q4_1 block is 288
// or 320 bytes); PF9 the 9 of a Q8_0 block (544 bytes).
#define PF5 \
	PREFETCHT0 3072(SI); PREFETCHT0 3136(SI); PREFETCHT0 3200(SI); PREFETCHT0 3264(SI); PREFETCHT0 3328(SI)
#define PF9 \
	PF5; PREFETCHT0 3392(SI); PREFETCHT0 3456(SI); PREFETCHT0 3520(SI); PREFETCHT0 3584(SI)

// NIBY unpacks the 32 bytes at addr into low nibbles ylo and high nibbles yhi.
#define NIBY(addr, ylo, yhi) \
	VMOVDQU addr, ylo; VPSRLW $4, ylo, yhi; VPAND nibmask<>(SB), ylo, ylo; VPAND nibmask<>(SB), yhi, yhi

// Q4WY loads one half of a Q4 block's weights, the 32-byte halves at o,
// o+64, o+128, o+192, into Y0-Y7.
#define Q4WY(o) \
	NIBY(o(SI), Y0, Y1); NIBY(o+64(SI), Y2, Y3); NIBY(o+128(SI), Y4, Y5); NIBY(o+192(SI), Y6, Y7)

// Q8WY loads one half of a Q8_0 block's weights (the halves at o, o+64, …) into Y0-Y7.
#define Q8WY(o) \
	VMOVDQU o(SI), Y0; VMOVDQU o+64(SI), Y1; VMOVDQU o+128(SI), Y2; VMOVDQU o+192(SI), Y3; \
	VMOVDQU o+256(SI), Y4; VMOVDQU o+320(SI), Y5; VMOVDQU o+384(SI), Y6; VMOVDQU o+448(SI), Y7

// BF16Y loads 8 bfloat16 values at addr as float32 into y.
#define BF16Y(addr, y) \
	VPMOVZXWD addr, y; VPSLLD $16, y, y

// DP8Y sets Y10 to the integer dot products of Y0-Y7 with the 32
// activation bytes of the current vector, in two chains.
#define DP8Y \
	VPXOR Y10, Y10, Y10; VPXOR Y11, Y11, Y11; \
	VPBROADCASTD (DI)(R12*1), Y12; VPBROADCASTD 4(DI)(R12*1), Y13; \
	VPBROADCASTD 8(DI)(R12*1), Y14; VPBROADCASTD 12(DI)(R12*1), Y15; \
	VPDPBUSDY(10, 0, 12); VPDPBUSDY(11, 1, 13); VPDPBUSDY(10, 2, 14); VPDPBUSDY(11, 3, 15); \
	VPBROADCASTD 16(DI)(R12*1), Y12; VPBROADCASTD 20(DI)(R12*1), Y13; \
	VPBROADCASTD 24(DI)(R12*1), Y14; VPBROADCASTD 28(DI)(R12*1), Y15; \
	VPDPBUSDY(10, 4, 12); VPDPBUSDY(11, 5, 13); VPDPBUSDY(10, 6, 14); VPDPBUSDY(11, 7, 15); \
	VPADDD Y11, Y10, Y10

// OFFY(sh) takes the weights' storage offset out of Y10: Y10 -= Σq << sh
// (Q4_0: 8·Σq, Q8_0: 128·Σq).
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

// func gemmQ4_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_0AVXVNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_0AVXVNNIblock:
	PF5
	VCVTPH2PS (SI), Y8
	Q4WY(32)
	TOKENS(0)
gemmQ4_0AVXVNNItok0:
	DP8Y
	OFFY(3)
	SCALEY
	ACCY
	JNZ gemmQ4_0AVXVNNItok0
	VCVTPH2PS 16(SI), Y8
	Q4WY(64)
	TOKENS(1)
gemmQ4_0AVXVNNItok1:
	DP8Y
	OFFY(3)
	SCALEY
	ACCY
	JNZ gemmQ4_0AVXVNNItok1
	NEXT(288)
	JNZ gemmQ4_0AVXVNNIblock
	VZEROUPPER
	RET

// func gemmQ4_1AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1AVXVNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_1AVXVNNIblock:
	PF5
	VCVTPH2PS (SI), Y8
	VCVTPH2PS 32(SI), Y9
	Q4WY(64)
	TOKENS(0)
gemmQ4_1AVXVNNItok0:
	DP8Y
	SCALEY
	ACCMINY
	JNZ gemmQ4_1AVXVNNItok0
	VCVTPH2PS 16(SI), Y8
	VCVTPH2PS 48(SI), Y9
	Q4WY(96)
	TOKENS(1)
gemmQ4_1AVXVNNItok1:
	DP8Y
	SCALEY
	ACCMINY
	JNZ gemmQ4_1AVXVNNItok1
	NEXT(320)
	JNZ gemmQ4_1AVXVNNIblock
	VZEROUPPER
	RET

// func gemmQ4_1BF16AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1BF16AVXVNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_1BF16AVXVNNIblock:
	PF5
	BF16Y((SI), Y8)
	BF16Y(32(SI), Y9)
	Q4WY(64)
	TOKENS(0)
gemmQ4_1BF16AVXVNNItok0:
	DP8Y
	SCALEY
	ACCMINY
	JNZ gemmQ4_1BF16AVXVNNItok0
	BF16Y(16(SI), Y8)
	BF16Y(48(SI), Y9)
	Q4WY(96)
	TOKENS(1)
gemmQ4_1BF16AVXVNNItok1:
	DP8Y
	SCALEY
	ACCMINY
	JNZ gemmQ4_1BF16AVXVNNItok1
	NEXT(320)
	JNZ gemmQ4_1BF16AVXVNNIblock
	VZEROUPPER
	RET

// func gemmQ8_0AVXVNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ8_0AVXVNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ8_0AVXVNNIblock:
	PF9
	VCVTPH2PS (SI), Y8
	Q8WY(32)
	TOKENS(0)
gemmQ8_0AVXVNNItok0:
	DP8Y
	OFFY(7)
	SCALEY
	ACCY
	JNZ gemmQ8_0AVXVNNItok0
	VCVTPH2PS 16(SI), Y8
	Q8WY(64)
	TOKENS(1)
gemmQ8_0AVXVNNItok1:
	DP8Y
	OFFY(7)
	SCALEY
	ACCY
	JNZ gemmQ8_0AVXVNNItok1
	NEXT(544)
	JNZ gemmQ8_0AVXVNNIblock
	VZEROUPPER
	RET

// The one-vector kernels. BCAST8 broadcasts the block's eight activation
// dwords into Y0-Y7, and zeroes the two halves' integer sums Y12, Y15.
#define BCAST8 \
	VPBROADCASTD (DI), Y0; VPBROADCASTD 4(DI), Y1; VPBROADCASTD 8(DI), Y2; VPBROADCASTD 12(DI), Y3; \
	VPBROADCASTD 16(DI), Y4; VPBROADCASTD 20(DI), Y5; VPBROADCASTD 24(DI), Y6; VPBROADCASTD 28(DI), Y7; \
	VPXOR Y12, Y12, Y12; VPXOR Y15, Y15, Y15

// Q4LINE1 adds the 64-byte register row at o (both halves) times the
// activation dwords in Y(lo) and Y(hi) (its low and high nibbles) to Y12
// (rows 0-7) and Y15 (rows 8-15).
#define Q4LINE1(o, lo, hi) \
	NIBY(o(SI), Y13, Y14); VPDPBUSDY(12, 13, lo); VPDPBUSDY(12, 14, hi); \
	NIBY(o+32(SI), Y13, Y14); VPDPBUSDY(15, 13, lo); VPDPBUSDY(15, 14, hi)

// Q4DOT1 is a Q4 block's integer sums, its weights at o.
#define Q4DOT1(o) \
	Q4LINE1(o, 0, 1); Q4LINE1(o+64, 2, 3); Q4LINE1(o+128, 4, 5); Q4LINE1(o+192, 6, 7)

// Q4LINE1H is Q4LINE1 with the high nibbles unshifted (byte & 0xF0, 16
// times the nibble) into their own chains Y10 (rows 0-7) and Y11 (rows
// 8-15), whose sums are multiples of 16: HISUM1 divides them by 16
// (arithmetic shift, exact) and adds them to Y12 and Y15. The same
// integers as Q4DOT1, so the same bits; one shift fewer per 32 bytes.
#define Q4LINE1H(o, lo, hi) \
	VMOVDQU o(SI), Y13; VPAND nibmask<>(SB), Y13, Y14; VPAND hinibmask<>(SB), Y13, Y13; \
	VPDPBUSDY(12, 14, lo); VPDPBUSDY(10, 13, hi); \
	VMOVDQU o+32(SI), Y13; VPAND nibmask<>(SB), Y13, Y14; VPAND hinibmask<>(SB), Y13, Y13; \
	VPDPBUSDY(15, 14, lo); VPDPBUSDY(11, 13, hi)

// Q4DOT1H is Q4DOT1 by Q4LINE1H (Y10, Y11 zeroed first).
#define Q4DOT1H(o) \
	VPXOR Y10, Y10, Y10; VPXOR Y11, Y11, Y11; \
	Q4LINE1H(o, 0, 1); Q4LINE1H(o+64, 2, 3); Q4LINE1H(o+128, 4, 5); Q4LINE1H(o+192, 6, 7); \
	VPSRAD $4, Y10, Y10; VPADDD Y10, Y12, Y12; VPSRAD $4, Y11, Y11; VPADDD Y11, Y15, Y15

// Q8LINE1 adds the register row at o times Y(k) to Y12 and Y15.
#define Q8LINE1(o, k) \
	VMOVDQU o(SI), Y13; VPDPBUSDY(12, 13, k); VMOVDQU o+32(SI), Y14; VPDPBUSDY(15, 14, k)

// OFF1(sh) takes Σq << sh out of both halves' sums.
#define OFF1(sh) \
	VPBROADCASTD (BX), Y13; VPSLLD $sh, Y13, Y13; VPSUBD Y13, Y12, Y12; VPSUBD Y13, Y15, Y15

// SUMS1 converts both halves' integer sums to float.
#define SUMS1 \
	VCVTDQ2PS Y12, Y12; VCVTDQ2PS Y15, Y15

// ADDSCALED1(y, sums, acc): acc += sums · (y · dx), dx broadcast in Y14
// (y holds 8 rows' scales as float32).
#define ADDSCALED1(y, sums, acc) \
	VMULPS Y14, y, y; VMULPS y, sums, sums; VADDPS sums, acc, acc

// ADDMIN1(y, acc): acc += y · s, s broadcast in Y14.
#define ADDMIN1(y, acc) \
	VMULPS Y14, y, y; VADDPS y, acc, acc

// func gemmQ4_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ4_0AVXVNNIx1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
gemmQ4_0AVXVNNIx1block:
	PF5
	BCAST8
	Q4DOT1H(32)
	OFF1(3)
	SUMS1
	VBROADCASTSS (DX), Y14
	VCVTPH2PS (SI), Y13
	ADDSCALED1(Y13, Y12, Y8)
	VCVTPH2PS 16(SI), Y13
	ADDSCALED1(Y13, Y15, Y9)
	NEXT(288)
	JNZ gemmQ4_0AVXVNNIx1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VZEROUPPER
	RET

// func gemmQ4_1AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ4_1AVXVNNIx1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
gemmQ4_1AVXVNNIx1block:
	PF5
	BCAST8
	Q4DOT1(64)
	SUMS1
	VBROADCASTSS (DX), Y14
	VCVTPH2PS (SI), Y13
	ADDSCALED1(Y13, Y12, Y8)
	VCVTPH2PS 16(SI), Y13
	ADDSCALED1(Y13, Y15, Y9)
	VBROADCASTSS (R9), Y14
	VCVTPH2PS 32(SI), Y13
	ADDMIN1(Y13, Y10)
	VCVTPH2PS 48(SI), Y13
	ADDMIN1(Y13, Y11)
	NEXT(320)
	JNZ gemmQ4_1AVXVNNIx1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y10, 64(AX)
	VMOVUPS Y11, 96(AX)
	VZEROUPPER
	RET

// func gemmQ4_1BF16AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ4_1BF16AVXVNNIx1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
gemmQ4_1BF16AVXVNNIx1block:
	PF5
	BCAST8
	Q4DOT1(64)
	SUMS1
	VBROADCASTSS (DX), Y14
	BF16Y((SI), Y13)
	ADDSCALED1(Y13, Y12, Y8)
	BF16Y(16(SI), Y13)
	ADDSCALED1(Y13, Y15, Y9)
	VBROADCASTSS (R9), Y14
	BF16Y(32(SI), Y13)
	ADDMIN1(Y13, Y10)
	BF16Y(48(SI), Y13)
	ADDMIN1(Y13, Y11)
	NEXT(320)
	JNZ gemmQ4_1BF16AVXVNNIx1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y10, 64(AX)
	VMOVUPS Y11, 96(AX)
	VZEROUPPER
	RET

// func gemmQ8_0AVXVNNIx1(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
// (ntok is 1; out is not read, only written)
TEXT ·gemmQ8_0AVXVNNIx1(SB), NOSPLIT, $0-80
	ARGS
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
gemmQ8_0AVXVNNIx1block:
	PF9
	BCAST8
	Q8LINE1(32, 0)
	Q8LINE1(96, 1)
	Q8LINE1(160, 2)
	Q8LINE1(224, 3)
	Q8LINE1(288, 4)
	Q8LINE1(352, 5)
	Q8LINE1(416, 6)
	Q8LINE1(480, 7)
	OFF1(7)
	SUMS1
	VBROADCASTSS (DX), Y14
	VCVTPH2PS (SI), Y13
	ADDSCALED1(Y13, Y12, Y8)
	VCVTPH2PS 16(SI), Y13
	ADDSCALED1(Y13, Y15, Y9)
	NEXT(544)
	JNZ gemmQ8_0AVXVNNIx1block
	MOVQ out+72(FP), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VZEROUPPER
	RET
