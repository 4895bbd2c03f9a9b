// AVX-512 VNNI kernels for Packed matrices (pack.go): one group of 16
// weight rows times ntok Q8 activation vectors. Per 32-value block the
// group's weights are loaded once into Z0-Z7 (lane r of Zk: row r's
// weights 4k..4k+3, unsigned bytes) and their scales into Z8 (and
// minimums into Z9); then for each vector the block's 32 activation
// bytes are broadcast four at a time into VPDPBUSD, which leaves row r's
// exact integer block sum in lane r of Z10. That is converted to float,
// scaled by d·dx (and plus m·s for Q4_1) and added to the vector's 16
// accumulators, which live in out (ntok×16 float32, zeroed by the
// caller). Multiplications and additions are separate (no FMA) and in
// DotQ8Ref's order, so every result equals DotQ8Ref bit for bit.
//
// Registers: SI weights, CX blocks left, DI activation bytes of this
// block (vector 0), R8 bytes between vectors' activations, DX / BX / R9
// this block's scale / Σq / Q4_1 sum of vector 0, R10 bytes between
// vectors' scales; per vector R12, R13 offsets, AX accumulators, R11
// vectors left. Z31 nibble mask, Z30 zero.

#include "textflag.h"

#define ARGS \
	MOVQ w+0(FP), SI; MOVQ nb+8(FP), CX; MOVQ qs+16(FP), DI; MOVQ qstride+24(FP), R8; \
	MOVQ d+32(FP), DX; MOVQ sum+40(FP), BX; MOVQ s+48(FP), R9; MOVQ dstride+56(FP), R10; \
	MOVL $0x0F0F0F0F, AX; VPBROADCASTD AX, Z31; VPXORD Z30, Z30, Z30

// NIB unpacks the 64 bytes at addr into low nibbles zlo and high nibbles zhi.
#define NIB(addr, zlo, zhi) \
	VMOVDQU64 addr, Z16; VPSRLW $4, Z16, Z17; VPANDQ Z31, Z16, zlo; VPANDQ Z31, Z17, zhi

// Q4W loads a Q4 block's 256 weight bytes at addr into Z0-Z7.
#define Q4W(o) \
	NIB(o(SI), Z0, Z1); NIB(o+64(SI), Z2, Z3); NIB(o+128(SI), Z4, Z5); NIB(o+192(SI), Z6, Z7)

// DP8 adds the integer dot products of Z0-Z7 with the 32 activation
// bytes of the current vector into Z10.
#define DP8 \
	VPDPBUSD.BCST (DI)(R12*1), Z0, Z10; VPDPBUSD.BCST 4(DI)(R12*1), Z1, Z10; \
	VPDPBUSD.BCST 8(DI)(R12*1), Z2, Z10; VPDPBUSD.BCST 12(DI)(R12*1), Z3, Z10; \
	VPDPBUSD.BCST 16(DI)(R12*1), Z4, Z10; VPDPBUSD.BCST 20(DI)(R12*1), Z5, Z10; \
	VPDPBUSD.BCST 24(DI)(R12*1), Z6, Z10; VPDPBUSD.BCST 28(DI)(R12*1), Z7, Z10

// SCALE: Z10 = float(Z10) · (d · dx)
#define SCALE \
	VCVTDQ2PS Z10, Z10; VMULPS.BCST (DX)(R13*1), Z8, Z11; VMULPS Z11, Z10, Z10

// ACC adds Z10 to the vector's accumulators and steps to the next vector.
#define ACC \
	VADDPS (AX), Z10, Z10; VMOVUPS Z10, (AX); \
	ADDQ R8, R12; ADDQ R10, R13; ADDQ $64, AX; DECQ R11

// ACCMIN is ACC for Q4_1: Z10 to the accumulators, the minimum terms m·s
// to a second set of accumulators after them (ggml sums those apart).
#define ACCMIN \
	VADDPS (AX), Z10, Z10; VMOVUPS Z10, (AX); \
	VMULPS.BCST (R9)(R13*1), Z9, Z11; VADDPS 64(AX), Z11, Z11; VMOVUPS Z11, 64(AX); \
	ADDQ R8, R12; ADDQ R10, R13; ADDQ $128, AX; DECQ R11

#define TOKENS \
	MOVQ out+72(FP), AX; MOVQ ntok+64(FP), R11; XORQ R12, R12; XORQ R13, R13

#define NEXT(bytes) \
	ADDQ $bytes, SI; ADDQ $32, DI; ADDQ $4, DX; ADDQ $4, BX; ADDQ $4, R9; DECQ CX

// func gemmQ4_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_0VNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_0VNNIblock:
	VCVTPH2PS (SI), Z8
	Q4W(32)
	TOKENS
gemmQ4_0VNNItok:
	VPSLLD.BCST $3, (BX)(R13*1), Z10
	VPSUBD Z10, Z30, Z10
	DP8
	SCALE

	ACC
	JNZ gemmQ4_0VNNItok
	NEXT(288)
	JNZ gemmQ4_0VNNIblock
	VZEROUPPER
	RET

// Q4_1: out holds per vector 16 accumulators then 16 minimum sums.

// func gemmQ4_1VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1VNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_1VNNIblock:
	VCVTPH2PS (SI), Z8
	VCVTPH2PS 32(SI), Z9
	Q4W(64)
	TOKENS
gemmQ4_1VNNItok:
	VPXORD Z10, Z10, Z10
	DP8
	SCALE
	ACCMIN
	JNZ gemmQ4_1VNNItok
	NEXT(320)
	JNZ gemmQ4_1VNNIblock
	VZEROUPPER
	RET

// func gemmQ4_1BF16VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ4_1BF16VNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ4_1BF16VNNIblock:
	VPMOVZXWD (SI), Z8
	VPSLLD $16, Z8, Z8
	VPMOVZXWD 32(SI), Z9
	VPSLLD $16, Z9, Z9
	Q4W(64)
	TOKENS
gemmQ4_1BF16VNNItok:
	VPXORD Z10, Z10, Z10
	DP8
	SCALE
	ACCMIN
	JNZ gemmQ4_1BF16VNNItok
	NEXT(320)
	JNZ gemmQ4_1BF16VNNIblock
	VZEROUPPER
	RET

// func gemmQ8_0VNNI(w *byte, nb int, qs *int8, qstride int, d *float32, sum *int32, s *float32, dstride int, ntok int, out *float32)
TEXT ·gemmQ8_0VNNI(SB), NOSPLIT, $0-80
	ARGS
gemmQ8_0VNNIblock:
	VCVTPH2PS (SI), Z8
	VMOVDQU64 32(SI), Z0
	VMOVDQU64 96(SI), Z1
	VMOVDQU64 160(SI), Z2
	VMOVDQU64 224(SI), Z3
	VMOVDQU64 288(SI), Z4
	VMOVDQU64 352(SI), Z5
	VMOVDQU64 416(SI), Z6
	VMOVDQU64 480(SI), Z7
	TOKENS
gemmQ8_0VNNItok:
	VPSLLD.BCST $7, (BX)(R13*1), Z10
	VPSUBD Z10, Z30, Z10
	DP8
	SCALE

	ACC
	JNZ gemmQ8_0VNNItok
	NEXT(544)
	JNZ gemmQ8_0VNNIblock
	VZEROUPPER
	RET

