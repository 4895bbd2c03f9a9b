// AVX2 attention kernels (attn.go): the AVX-512 kernels' arithmetic on
// two 8-lane halves of each 16-lane block, 4 query rows at a time. DO
// NOT reorder the float operations: each follows its plain-Go twin
// exactly (separate multiplies and adds, no FMA), so the results are
// equal bit for bit.

#include "textflag.h"
#include "expf_amd64.h"

// The 16 keys or values of one dimension or position into Y8, Y9.
#define AK32 VMOVUPS (BX), Y8; VMOVUPS 32(BX), Y9
#define AK16 VCVTPH2PS (BX), Y8; VCVTPH2PS 16(BX), Y9
#define AV32 VMOVUPS (R12), Y8; VMOVUPS 32(R12), Y9
#define AV16 VCVTPH2PS (R12), Y8; VCVTPH2PS 16(R12), Y9

// ASCORE adds row h's query value (broadcast from off(AX)) times the 16
// keys in Y8, Y9 to row h's accumulators lo, hi.
#define ASCORE(off, lo, hi) \
	VBROADCASTSS off(AX), Y10; VMULPS Y8, Y10, Y11; VADDPS Y11, lo, lo; VMULPS Y9, Y10, Y12; VADDPS Y12, hi, hi

// AMAX stores the scaled accumulators lo, hi at (AX) and folds them into
// the row's lane maxima at off(R13), the lanes past the tail (last block:
// Y13, Y14 masks) left out.
#define AMAX(lo, hi, off) \
	VMULPS Y15, lo, lo; VMULPS Y15, hi, hi; VMOVUPS lo, (AX); VMOVUPS hi, 32(AX); ADDQ R12, AX; \
	VBLENDVPS Y13, lo, Y10, lo; VBLENDVPS Y14, hi, Y10, hi; \
	VMAXPS off(R13), lo, lo; VMAXPS off+32(R13), hi, hi; VMOVUPS lo, off(R13); VMOVUPS hi, off+32(R13)

// ASCORES_BODY(LOADK, KBYTES): 4 rows' scores per block, as
// SCORES_BODY in attn_amd64.s; the lane maxima at mx start at -inf (set
// by the caller) and R11 points at the last block's lane masks.
#define ASCORES_BODY(LOADK, KBYTES) \
	MOVQ qt+0(FP), SI; MOVQ hd+8(FP), R9; MOVQ k+16(FP), DI; MOVQ kstride+24(FP), R10; \
	MOVQ nb+32(FP), CX; MOVQ mask+40(FP), R11; VBROADCASTSS scale+48(FP), Y15; \
	MOVQ s+56(FP), DX; MOVQ sstride+64(FP), R12; MOVQ mx+72(FP), R13; \
	VPCMPEQD Y13, Y13, Y13; VPCMPEQD Y14, Y14, Y14; \
ablock: \
	CMPQ CX, $1; JNE afull; VMOVDQU (R11), Y13; VMOVDQU 32(R11), Y14; \
afull: \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	MOVQ SI, AX; MOVQ DI, BX; MOVQ R9, R8; \
adloop: \
	LOADK; \
	ASCORE(0, Y0, Y1); ASCORE(4, Y2, Y3); ASCORE(8, Y4, Y5); ASCORE(12, Y6, Y7); \
	ADDQ $KBYTES, BX; ADDQ $32, AX; DECQ R8; JNZ adloop; \
	MOVL $0xFF800000, AX; MOVQ AX, X10; VPBROADCASTD X10, Y10; \
	MOVQ DX, AX; \
	AMAX(Y0, Y1, 0); AMAX(Y2, Y3, 64); AMAX(Y4, Y5, 128); AMAX(Y6, Y7, 192); \
	ADDQ $64, DX; ADDQ R10, DI; DECQ CX; JNZ ablock; \
	VZEROUPPER; RET

// APV adds row h's probability (broadcast from mem) times the 16 values
// in Y8, Y9 to row h's accumulators lo, hi.
#define APV(mem, lo, hi) \
	VBROADCASTSS mem, Y10; VMULPS Y8, Y10, Y11; VADDPS Y11, lo, lo; VMULPS Y9, Y10, Y12; VADDPS Y12, hi, hi

// APV_BODY(LOADV, VBYTES): 4 rows' Σ_t p_h[t]·v_t, 16 dimensions
// at a time, as PV_BODY in attn_amd64.s.
#define APV_BODY(LOADV, VBYTES) \
	MOVQ p+0(FP), SI; MOVQ pstride+8(FP), R8; LEAQ (R8)(R8*2), R9; \
	MOVQ v+24(FP), DI; MOVQ vstride+32(FP), R10; MOVQ hd+40(FP), R11; SHRQ $4, R11; \
	MOVQ o+48(FP), DX; MOVQ hd+40(FP), R13; SHLQ $2, R13; \
achunk: \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	MOVQ SI, AX; MOVQ DI, R12; MOVQ n+16(FP), CX; \
atloop: \
	LOADV; \
	APV((AX), Y0, Y1); APV((AX)(R8*1), Y2, Y3); APV((AX)(R8*2), Y4, Y5); APV((AX)(R9*1), Y6, Y7); \
	ADDQ $4, AX; ADDQ R10, R12; DECQ CX; JNZ atloop; \
	MOVQ DX, AX; \
	VMOVUPS Y0, (AX); VMOVUPS Y1, 32(AX); ADDQ R13, AX; VMOVUPS Y2, (AX); VMOVUPS Y3, 32(AX); ADDQ R13, AX; \
	VMOVUPS Y4, (AX); VMOVUPS Y5, 32(AX); ADDQ R13, AX; VMOVUPS Y6, (AX); VMOVUPS Y7, 32(AX); \
	ADDQ $64, DX; ADDQ $VBYTES, DI; DECQ R11; JNZ achunk; \
	VZEROUPPER; RET

// AEXP(off, sum, mask): 8 lanes at off(DI) = expf(lanes − m (Y15)),
// lanes off mask zeroed, added to sum. R11 points at the constants, 8
// copies each: lo, log2e, c1, c2, p0…p5, 1, 127.
#define AEXP(off, sum, mask) \
	VMOVUPS off(DI), Y1; VSUBPS Y15, Y1, Y1; \
	EXPF256; VMULPS Y3, Y7, Y7; VANDPS mask, Y7, Y7; \
	VMOVUPS Y7, off(DI); VADDPS Y7, sum, sum

// func attnScores4F32AVX2(qt *float32, hd int, k *float32, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32)
TEXT ·attnScores4F32AVX2(SB), NOSPLIT, $0-80
	ASCORES_BODY(AK32, 64)

// func attnScores4F16AVX2(qt *float32, hd int, k *uint16, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32)
TEXT ·attnScores4F16AVX2(SB), NOSPLIT, $0-80
	ASCORES_BODY(AK16, 32)

// func attnPV4F32AVX2(p *float32, pstride int, n int, v *float32, vstride int, hd int, o *float32)
TEXT ·attnPV4F32AVX2(SB), NOSPLIT, $0-56
	APV_BODY(AV32, 64)

// func attnPV4F16AVX2(p *float32, pstride int, n int, v *uint16, vstride int, hd int, o *float32)
TEXT ·attnPV4F16AVX2(SB), NOSPLIT, $0-56
	APV_BODY(AV16, 32)

// func attnExpAVX2(s *float32, nb int, mask *int32, m float32, sum *float32, consts *float32)
// attnExp on two 8-lane halves per block; mask: the last block's 16
// lane masks.
TEXT ·attnExpAVX2(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), DI
	MOVQ nb+8(FP), CX
	MOVQ mask+16(FP), R10
	VBROADCASTSS m+24(FP), Y15
	MOVQ sum+32(FP), DX
	MOVQ consts+40(FP), R11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VPCMPEQD Y14, Y14, Y14
	VPCMPEQD Y0, Y0, Y0

aeloop:
	CMPQ CX, $1
	JNE aefull
	VMOVDQU (R10), Y14
	VMOVDQU 32(R10), Y0

aefull:
	AEXP(0, Y12, Y14)
	AEXP(32, Y13, Y0)
	ADDQ $64, DI
	DECQ CX
	JNZ aeloop
	VMOVUPS Y12, (DX)
	VMOVUPS Y13, 32(DX)
	VZEROUPPER
	RET

// func attnScores4Q8AVX2(qt *float32, hd int, k *int8, kstride int, nb int, mask *int32, scale float32, s *float32, sstride int, mx *float32, d *uint16, dstride int)
// ASCORES_BODY on the 8-bit cache (attnScores8Q8): the keys' scales in
// Y13, Y14 while the dimensions are summed, the last block's lane masks
// loaded into them after.
TEXT ·attnScores4Q8AVX2(SB), NOSPLIT, $0-96
	MOVQ qt+0(FP), SI
	MOVQ k+16(FP), DI
	MOVQ kstride+24(FP), R10
	MOVQ nb+32(FP), CX
	MOVQ mask+40(FP), R11
	VBROADCASTSS scale+48(FP), Y15
	MOVQ s+56(FP), DX
	MOVQ sstride+64(FP), R12
	MOVQ mx+72(FP), R13
	MOVQ d+80(FP), R14

qablock:
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7
	MOVQ SI, AX
	MOVQ DI, BX
	MOVQ R14, R15
	MOVQ hd+8(FP), R8
	SHRQ $5, R8

qachunk:
	VCVTPH2PS (R15), Y13
	VCVTPH2PS 16(R15), Y14
	MOVQ $32, R9

qadloop:
	VPMOVSXBD (BX), Y8
	VPMOVSXBD 8(BX), Y9
	VCVTDQ2PS Y8, Y8
	VCVTDQ2PS Y9, Y9
	VMULPS Y13, Y8, Y8
	VMULPS Y14, Y9, Y9
	ASCORE(0, Y0, Y1); ASCORE(4, Y2, Y3); ASCORE(8, Y4, Y5); ASCORE(12, Y6, Y7)
	ADDQ $16, BX
	ADDQ $32, AX
	DECQ R9
	JNZ qadloop
	ADDQ $32, R15
	DECQ R8
	JNZ qachunk
	VPCMPEQD Y13, Y13, Y13
	VPCMPEQD Y14, Y14, Y14
	CMPQ CX, $1
	JNE qafull
	VMOVDQU (R11), Y13
	VMOVDQU 32(R11), Y14

qafull:
	MOVL $0xFF800000, AX
	MOVQ AX, X10
	VPBROADCASTD X10, Y10
	MOVQ DX, AX
	AMAX(Y0, Y1, 0); AMAX(Y2, Y3, 64); AMAX(Y4, Y5, 128); AMAX(Y6, Y7, 192)
	ADDQ $64, DX
	ADDQ R10, DI
	ADDQ dstride+88(FP), R14
	DECQ CX
	JNZ qablock
	VZEROUPPER
	RET

// func attnPV4Q8AVX2(p *float32, pstride int, n int, v *int8, vstride int, hd int, o *float32, d *uint16, dstride int)
// APV_BODY on the 8-bit cache: a position's 16 values widened and
// multiplied by their block's scale (broadcast from R14, dstride bytes
// between positions; R15 the first position's scale of the chunk, the
// next one every two chunks of 16).
TEXT ·attnPV4Q8AVX2(SB), NOSPLIT, $0-72
	MOVQ p+0(FP), SI
	MOVQ pstride+8(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ v+24(FP), DI
	MOVQ vstride+32(FP), R10
	MOVQ hd+40(FP), R11
	SHRQ $4, R11
	MOVQ o+48(FP), DX
	MOVQ hd+40(FP), R13
	SHLQ $2, R13
	MOVQ d+56(FP), R15
	MOVQ dstride+64(FP), BX

qaschunk:
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7
	MOVQ SI, AX
	MOVQ DI, R12
	MOVQ R15, R14
	MOVQ n+16(FP), CX

qatloop:
	VPMOVSXBD (R12), Y8
	VPMOVSXBD 8(R12), Y9
	VCVTDQ2PS Y8, Y8
	VCVTDQ2PS Y9, Y9
	VPBROADCASTW (R14), X13
	VCVTPH2PS X13, Y13
	VMULPS Y13, Y8, Y8
	VMULPS Y13, Y9, Y9
	APV((AX), Y0, Y1); APV((AX)(R8*1), Y2, Y3); APV((AX)(R8*2), Y4, Y5); APV((AX)(R9*1), Y6, Y7)
	ADDQ $4, AX
	ADDQ R10, R12
	ADDQ BX, R14
	DECQ CX
	JNZ qatloop
	MOVQ DX, AX
	VMOVUPS Y0, (AX); VMOVUPS Y1, 32(AX); ADDQ R13, AX; VMOVUPS Y2, (AX); VMOVUPS Y3, 32(AX); ADDQ R13, AX
	VMOVUPS Y4, (AX); VMOVUPS Y5, 32(AX); ADDQ R13, AX; VMOVUPS Y6, (AX); VMOVUPS Y7, 32(AX)
	ADDQ $64, DX
	ADDQ $16, DI
	BTQ $0, R11
	JCC qaeven
	ADDQ $2, R15

qaeven:
	DECQ R11
	JNZ qaschunk
	VZEROUPPER
	RET
