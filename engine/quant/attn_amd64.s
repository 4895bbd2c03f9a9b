// AVX-512 attention kernels (attn.go). DO NOT reorder the float
// operations: each follows its plain-Go twin (scoresGo, expRowGo/expf,
// pvGo) exactly, with separate multiplies and adds (no FMA), so the
// results are equal bit for bit.

#include "textflag.h"
#include "expf_amd64.h"

// SCORE multiplies the 16 keys in Z8 by row h's query value (broadcast
// from off(AX)) and adds the product to row h's accumulator acc.
#define SCORE(off, tmp, acc) VMULPS.BCST off(AX), Z8, tmp; VADDPS tmp, acc, acc

#define SCORES8 \
	SCORE(0, Z9, Z0); SCORE(4, Z10, Z1); SCORE(8, Z11, Z2); SCORE(12, Z12, Z3); \
	SCORE(16, Z13, Z4); SCORE(20, Z14, Z5); SCORE(24, Z15, Z6); SCORE(28, Z24, Z7)

// SCORES_BODY(LOADK, KBYTES): for each block (CX left, DI keys, R10 bytes
// between blocks), the 8 rows' scores of 16 positions: Z0-Z7 = Σ_d
// qt[d][h]·k[d][0:16] (SI queries transposed, R9 dimensions), × scale
// (Z30), stored at DX + h·R12, and the lane maxima over valid lanes (K1;
// the last block's valid lanes are R11) into Z16-Z23, stored at R13.
#define SCORES_BODY(LOADK, KBYTES) \
	MOVQ qt+0(FP), SI; MOVQ hd+8(FP), R9; MOVQ k+16(FP), DI; MOVQ kstride+24(FP), R10; \
	MOVQ nb+32(FP), CX; MOVQ tail+40(FP), R11; VBROADCASTSS scale+48(FP), Z30; \
	MOVQ s+56(FP), DX; MOVQ sstride+64(FP), R12; MOVQ mx+72(FP), R13; \
	MOVL $0xFF800000, AX; VPBROADCASTD AX, Z16; \
	VMOVAPS Z16, Z17; VMOVAPS Z16, Z18; VMOVAPS Z16, Z19; VMOVAPS Z16, Z20; \
	VMOVAPS Z16, Z21; VMOVAPS Z16, Z22; VMOVAPS Z16, Z23; \
	MOVQ $0xFFFF, AX; KMOVW AX, K1; \
block: \
	CMPQ CX, $1; JNE full; KMOVW R11, K1; \
full: \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	MOVQ SI, AX; MOVQ DI, BX; MOVQ R9, R8; \
dloop: \
	LOADK (BX), Z8; SCORES8; \
	ADDQ $KBYTES, BX; ADDQ $32, AX; DECQ R8; JNZ dloop; \
	VMULPS Z30, Z0, Z0; VMULPS Z30, Z1, Z1; VMULPS Z30, Z2, Z2; VMULPS Z30, Z3, Z3; \
	VMULPS Z30, Z4, Z4; VMULPS Z30, Z5, Z5; VMULPS Z30, Z6, Z6; VMULPS Z30, Z7, Z7; \
	MOVQ DX, AX; \
	VMOVUPS Z0, (AX); ADDQ R12, AX; VMOVUPS Z1, (AX); ADDQ R12, AX; \
	VMOVUPS Z2, (AX); ADDQ R12, AX; VMOVUPS Z3, (AX); ADDQ R12, AX; \
	VMOVUPS Z4, (AX); ADDQ R12, AX; VMOVUPS Z5, (AX); ADDQ R12, AX; \
	VMOVUPS Z6, (AX); ADDQ R12, AX; VMOVUPS Z7, (AX); \
	VMAXPS Z0, Z16, K1, Z16; VMAXPS Z1, Z17, K1, Z17; VMAXPS Z2, Z18, K1, Z18; VMAXPS Z3, Z19, K1, Z19; \
	VMAXPS Z4, Z20, K1, Z20; VMAXPS Z5, Z21, K1, Z21; VMAXPS Z6, Z22, K1, Z22; VMAXPS Z7, Z23, K1, Z23; \
	ADDQ $64, DX; ADDQ R10, DI; DECQ CX; JNZ block; \
	VMOVUPS Z16, 0(R13); VMOVUPS Z17, 64(R13); VMOVUPS Z18, 128(R13); VMOVUPS Z19, 192(R13); \
	VMOVUPS Z20, 256(R13); VMOVUPS Z21, 320(R13); VMOVUPS Z22, 384(R13); VMOVUPS Z23, 448(R13); \
	VZEROUPPER; RET

// PV multiplies the 16 values in Z8 by row h's probability (broadcast
// from mem) and adds the product to row h's accumulator acc.
#define PV(mem, tmp, acc) VMULPS.BCST mem, Z8, tmp; VADDPS tmp, acc, acc

// PV_BODY(LOADV, VBYTES): for each chunk of 16 dimensions (R11 left, DI
// values of position 0, R10 bytes between positions), Z0-Z7 = Σ_t
// p_h[t]·v_t[chunk] (SI probabilities, R8 bytes between rows, R9 = 3·R8),
// stored at DX + h·R13.
#define PV_BODY(LOADV, VBYTES) \
	MOVQ p+0(FP), SI; MOVQ pstride+8(FP), R8; LEAQ (R8)(R8*2), R9; \
	MOVQ v+24(FP), DI; MOVQ vstride+32(FP), R10; MOVQ hd+40(FP), R11; SHRQ $4, R11; \
	MOVQ o+48(FP), DX; MOVQ hd+40(FP), R13; SHLQ $2, R13; \
chunk: \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	MOVQ SI, AX; LEAQ (SI)(R8*4), BX; MOVQ DI, R12; MOVQ n+16(FP), CX; \
tloop: \
	LOADV (R12), Z8; \
	PV((AX), Z9, Z0); PV((AX)(R8*1), Z10, Z1); PV((AX)(R8*2), Z11, Z2); PV((AX)(R9*1), Z12, Z3); \
	PV((BX), Z13, Z4); PV((BX)(R8*1), Z14, Z5); PV((BX)(R8*2), Z15, Z6); PV((BX)(R9*1), Z16, Z7); \
	ADDQ $4, AX; ADDQ $4, BX; ADDQ R10, R12; DECQ CX; JNZ tloop; \
	MOVQ DX, AX; \
	VMOVUPS Z0, (AX); ADDQ R13, AX; VMOVUPS Z1, (AX); ADDQ R13, AX; \
	VMOVUPS Z2, (AX); ADDQ R13, AX; VMOVUPS Z3, (AX); ADDQ R13, AX; \
	VMOVUPS Z4, (AX); ADDQ R13, AX; VMOVUPS Z5, (AX); ADDQ R13, AX; \
	VMOVUPS Z6, (AX); ADDQ R13, AX; VMOVUPS Z7, (AX); \
	ADDQ $64, DX; ADDQ $VBYTES, DI; DECQ R11; JNZ chunk; \
	VZEROUPPER; RET

// PV2 multiplies the 32 values in Z16, Z17 by row h's probability
// (broadcast from mem into tmp) and adds the products to row h's
// accumulators lo, hi.
#define PV2(mem, tmp, lo, hi) \
	VBROADCASTSS mem, tmp; VMULPS Z16, tmp, Z26; VADDPS Z26, lo, lo; VMULPS Z17, tmp, Z27; VADDPS Z27, hi, hi

// PV32_BODY(LOADV, VBYTES): PV_BODY 32 dimensions at a time (HeadDim a
// multiple of 32): row h's accumulators are Z(h) and Z(h+8).
#define PV32_BODY(LOADV, VBYTES) \
	MOVQ p+0(FP), SI; MOVQ pstride+8(FP), R8; LEAQ (R8)(R8*2), R9; \
	MOVQ v+24(FP), DI; MOVQ vstride+32(FP), R10; MOVQ hd+40(FP), R11; SHRQ $5, R11; \
	MOVQ o+48(FP), DX; MOVQ hd+40(FP), R13; SHLQ $2, R13; \
chunk32: \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; VPXORD Z9, Z9, Z9; VPXORD Z10, Z10, Z10; VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; VPXORD Z13, Z13, Z13; VPXORD Z14, Z14, Z14; VPXORD Z15, Z15, Z15; \
	MOVQ SI, AX; LEAQ (SI)(R8*4), BX; MOVQ DI, R12; MOVQ n+16(FP), CX; \
tloop32: \
	LOADV; \
	PV2((AX), Z18, Z0, Z8); PV2((AX)(R8*1), Z19, Z1, Z9); PV2((AX)(R8*2), Z20, Z2, Z10); PV2((AX)(R9*1), Z21, Z3, Z11); \
	PV2((BX), Z22, Z4, Z12); PV2((BX)(R8*1), Z23, Z5, Z13); PV2((BX)(R8*2), Z24, Z6, Z14); PV2((BX)(R9*1), Z25, Z7, Z15); \
	ADDQ $4, AX; ADDQ $4, BX; ADDQ R10, R12; DECQ CX; JNZ tloop32; \
	MOVQ DX, AX; \
	VMOVUPS Z0, (AX); VMOVUPS Z8, 64(AX); ADDQ R13, AX; VMOVUPS Z1, (AX); VMOVUPS Z9, 64(AX); ADDQ R13, AX; \
	VMOVUPS Z2, (AX); VMOVUPS Z10, 64(AX); ADDQ R13, AX; VMOVUPS Z3, (AX); VMOVUPS Z11, 64(AX); ADDQ R13, AX; \
	VMOVUPS Z4, (AX); VMOVUPS Z12, 64(AX); ADDQ R13, AX; VMOVUPS Z5, (AX); VMOVUPS Z13, 64(AX); ADDQ R13, AX; \
	VMOVUPS Z6, (AX); VMOVUPS Z14, 64(AX); ADDQ R13, AX; VMOVUPS Z7, (AX); VMOVUPS Z15, 64(AX); \
	ADDQ $128, DX; ADDQ $VBYTES, DI; DECQ R11; JNZ chunk32; \
	VZEROUPPER; RET

// The 32 values of one position into Z16, Z17.
#define V32F32 VMOVUPS (R12), Z16; VMOVUPS 64(R12), Z17
#define V32F16 VCVTPH2PS (R12), Z16; VCVTPH2PS 32(R12), Z17

// func attnScores8F32(qt *float32, hd int, k *float32, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32)
TEXT ·attnScores8F32(SB), NOSPLIT, $0-80
	SCORES_BODY(VMOVUPS, 64)

// func attnScores8F16(qt *float32, hd int, k *uint16, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32)
TEXT ·attnScores8F16(SB), NOSPLIT, $0-80
	SCORES_BODY(VCVTPH2PS, 32)

// func attnExp(s *float32, nb int, tail uint64, m float32, sum *float32)
// s[t] = expf(s[t] - m) over nb blocks of 16 (lanes of the last block
// past tail set to 0), and sum[0:16] = the lane sums.
TEXT ·attnExp(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), DI
	MOVQ nb+8(FP), CX
	MOVQ tail+16(FP), R11
	VBROADCASTSS m+24(FP), Z31
	MOVQ sum+32(FP), DX
	EXPF_CONSTS512
	VPXORD Z0, Z0, Z0
	MOVQ $0xFFFF, AX
	KMOVW AX, K1

eloop:
	CMPQ CX, $1
	JNE efull
	KMOVW R11, K1

efull:
	VMOVUPS (DI), Z1
	VSUBPS Z31, Z1, Z1   // x = s - m
	EXPF512
	VMULPS.Z Z3, Z7, K1, Z7
	VMOVUPS Z7, (DI)
	VADDPS Z7, Z0, Z0
	ADDQ $64, DI
	DECQ CX
	JNZ eloop
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func attnPV8F32(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)
TEXT ·attnPV8F32(SB), NOSPLIT, $0-56
	PV_BODY(VMOVUPS, 64)

// func attnPV8F16(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)
TEXT ·attnPV8F16(SB), NOSPLIT, $0-56
	PV_BODY(VCVTPH2PS, 32)

// func attnPV8x32F32(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)
TEXT ·attnPV8x32F32(SB), NOSPLIT, $0-56
	PV32_BODY(V32F32, 128)

// func attnPV8x32F16(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)
TEXT ·attnPV8x32F16(SB), NOSPLIT, $0-56
	PV32_BODY(V32F16, 64)

// func attnScores8Q8(qt *float32, hd int, k *int8, kstride int, nb int, tail uint64, scale float32, s *float32, sstride int, mx *float32, d *uint16, dstride int)
// SCORES_BODY on the 8-bit cache: each dimension's 16 keys are widened
// to float32 and multiplied by their positions' scales (Z25, 16 float16
// at R15, the next 16 every 32 dimensions; R14 the block's scales, dstride
// bytes between blocks), then used as the float32 keys are.
TEXT ·attnScores8Q8(SB), NOSPLIT, $0-96
	MOVQ qt+0(FP), SI
	MOVQ k+16(FP), DI
	MOVQ kstride+24(FP), R10
	MOVQ nb+32(FP), CX
	MOVQ tail+40(FP), R11
	VBROADCASTSS scale+48(FP), Z30
	MOVQ s+56(FP), DX
	MOVQ sstride+64(FP), R12
	MOVQ mx+72(FP), R13
	MOVQ d+80(FP), R14
	MOVL $0xFF800000, AX
	VPBROADCASTD AX, Z16
	VMOVAPS Z16, Z17; VMOVAPS Z16, Z18; VMOVAPS Z16, Z19; VMOVAPS Z16, Z20
	VMOVAPS Z16, Z21; VMOVAPS Z16, Z22; VMOVAPS Z16, Z23
	MOVQ $0xFFFF, AX
	KMOVW AX, K1

qblock:
	CMPQ CX, $1
	JNE qfull
	KMOVW R11, K1

qfull:
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ R14, R15
	MOVQ hd+8(FP), R8
	SHRQ $5, R8

qchunk:
	VCVTPH2PS (R15), Z25
	MOVQ $32, R9

qdloop:
	VPMOVSXBD (BX), Z8
	VCVTDQ2PS Z8, Z8
	VMULPS Z25, Z8, Z8
	SCORES8
	ADDQ $16, BX
	ADDQ $32, AX
	DECQ R9
	JNZ qdloop
	ADDQ $32, R15
	DECQ R8
	JNZ qchunk
	VMULPS Z30, Z0, Z0; VMULPS Z30, Z1, Z1; VMULPS Z30, Z2, Z2; VMULPS Z30, Z3, Z3
	VMULPS Z30, Z4, Z4; VMULPS Z30, Z5, Z5; VMULPS Z30, Z6, Z6; VMULPS Z30, Z7, Z7
	MOVQ DX, AX
	VMOVUPS Z0, (AX); ADDQ R12, AX; VMOVUPS Z1, (AX); ADDQ R12, AX
	VMOVUPS Z2, (AX); ADDQ R12, AX; VMOVUPS Z3, (AX); ADDQ R12, AX
	VMOVUPS Z4, (AX); ADDQ R12, AX; VMOVUPS Z5, (AX); ADDQ R12, AX
	VMOVUPS Z6, (AX); ADDQ R12, AX; VMOVUPS Z7, (AX)
	VMAXPS Z0, Z16, K1, Z16; VMAXPS Z1, Z17, K1, Z17; VMAXPS Z2, Z18, K1, Z18; VMAXPS Z3, Z19, K1, Z19
	VMAXPS Z4, Z20, K1, Z20; VMAXPS Z5, Z21, K1, Z21; VMAXPS Z6, Z22, K1, Z22; VMAXPS Z7, Z23, K1, Z23
	ADDQ $64, DX
	ADDQ R10, DI
	ADDQ dstride+88(FP), R14
	DECQ CX
	JNZ qblock
	VMOVUPS Z16, 0(R13); VMOVUPS Z17, 64(R13); VMOVUPS Z18, 128(R13); VMOVUPS Z19, 192(R13)
	VMOVUPS Z20, 256(R13); VMOVUPS Z21, 320(R13); VMOVUPS Z22, 384(R13); VMOVUPS Z23, 448(R13)
	VZEROUPPER
	RET

// func attnPV8x32Q8(p *float32, pstride int, n int, v *int8, vstride int, hd int, o *float32, d *uint16, dstride int)
// PV32_BODY on the 8-bit cache: a position's 32 values widened to
// float32 and multiplied by their block's scale (broadcast from R14,
// dstride bytes between positions; R15 the first position's scale of
// the chunk).
TEXT ·attnPV8x32Q8(SB), NOSPLIT, $0-72
	MOVQ p+0(FP), SI
	MOVQ pstride+8(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ v+24(FP), DI
	MOVQ vstride+32(FP), R10
	MOVQ hd+40(FP), R11
	SHRQ $5, R11
	MOVQ o+48(FP), DX
	MOVQ hd+40(FP), R13
	SHLQ $2, R13
	MOVQ d+56(FP), R15

qchunk32:
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8; VPXORD Z9, Z9, Z9; VPXORD Z10, Z10, Z10; VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12; VPXORD Z13, Z13, Z13; VPXORD Z14, Z14, Z14; VPXORD Z15, Z15, Z15
	MOVQ SI, AX
	LEAQ (SI)(R8*4), BX
	MOVQ DI, R12
	MOVQ R15, R14
	MOVQ n+16(FP), CX

qtloop32:
	VPMOVSXBD (R12), Z16
	VPMOVSXBD 16(R12), Z17
	VCVTDQ2PS Z16, Z16
	VCVTDQ2PS Z17, Z17
	VPBROADCASTW (R14), Y28
	VCVTPH2PS Y28, Z28
	VMULPS Z28, Z16, Z16
	VMULPS Z28, Z17, Z17
	PV2((AX), Z18, Z0, Z8); PV2((AX)(R8*1), Z19, Z1, Z9); PV2((AX)(R8*2), Z20, Z2, Z10); PV2((AX)(R9*1), Z21, Z3, Z11)
	PV2((BX), Z22, Z4, Z12); PV2((BX)(R8*1), Z23, Z5, Z13); PV2((BX)(R8*2), Z24, Z6, Z14); PV2((BX)(R9*1), Z25, Z7, Z15)
	ADDQ $4, AX
	ADDQ $4, BX
	ADDQ R10, R12
	ADDQ dstride+64(FP), R14
	DECQ CX
	JNZ qtloop32
	MOVQ DX, AX
	VMOVUPS Z0, (AX); VMOVUPS Z8, 64(AX); ADDQ R13, AX; VMOVUPS Z1, (AX); VMOVUPS Z9, 64(AX); ADDQ R13, AX
	VMOVUPS Z2, (AX); VMOVUPS Z10, 64(AX); ADDQ R13, AX; VMOVUPS Z3, (AX); VMOVUPS Z11, 64(AX); ADDQ R13, AX
	VMOVUPS Z4, (AX); VMOVUPS Z12, 64(AX); ADDQ R13, AX; VMOVUPS Z5, (AX); VMOVUPS Z13, 64(AX); ADDQ R13, AX
	VMOVUPS Z6, (AX); VMOVUPS Z14, 64(AX); ADDQ R13, AX; VMOVUPS Z7, (AX); VMOVUPS Z15, 64(AX)
	ADDQ $128, DX
	ADDQ $32, DI
	ADDQ $2, R15
	DECQ R11
	JNZ qchunk32
	VZEROUPPER
	RET
