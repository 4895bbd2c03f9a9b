// The int8 dot-product loops of tools/dotpeak: each runs n iterations of
// independent chains of its level's multiply-add on register operands
// (u: unsigned bytes, s: signed bytes, broadcast from two dwords), so that
// the multiply units, not memory or a dependency, set the pace, then
// stores its accumulators to out for the caller to check.

#include "textflag.h"

// VPDPBUSDY(acc, u, s) is VPDPBUSD Ys, Yu, Yacc in its VEX form (AVX-VNNI),
// encoded by hand because the Go assembler knows only the EVEX form
// (engine/quant/avxvnni_amd64.s explains the encoding and how it was
// checked).
#define VPDPBUSDY(acc, u, s) \
	BYTE $0xC4; BYTE $(((1-((acc)>>3))<<7)|0x40|((1-((s)>>3))<<5)|0x02); \
	BYTE $((((15-(u))&15)<<3)|0x05); BYTE $0x50; BYTE $(0xC0|(((acc)&7)<<3)|((s)&7))

// func peakAVX512(n int, u, s uint32, out *[192]int32)
// Twelve chains of VPDPBUSD on zmm registers: 12 × 64 multiply-adds an
// iteration.
TEXT ·peakAVX512(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVL u+8(FP), AX
	MOVL s+12(FP), DX
	MOVQ out+16(FP), DI
	VPBROADCASTD AX, Z0
	VPBROADCASTD DX, Z1
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	TESTQ CX, CX
	JLE done512
loop512:
	VPDPBUSD Z1, Z0, Z10
	VPDPBUSD Z1, Z0, Z11
	VPDPBUSD Z1, Z0, Z12
	VPDPBUSD Z1, Z0, Z13
	VPDPBUSD Z1, Z0, Z14
	VPDPBUSD Z1, Z0, Z15
	VPDPBUSD Z1, Z0, Z16
	VPDPBUSD Z1, Z0, Z17
	VPDPBUSD Z1, Z0, Z18
	VPDPBUSD Z1, Z0, Z19
	VPDPBUSD Z1, Z0, Z20
	VPDPBUSD Z1, Z0, Z21
	DECQ CX
	JNZ loop512
done512:
	VMOVDQU32 Z10, 0(DI)
	VMOVDQU32 Z11, 64(DI)
	VMOVDQU32 Z12, 128(DI)
	VMOVDQU32 Z13, 192(DI)
	VMOVDQU32 Z14, 256(DI)
	VMOVDQU32 Z15, 320(DI)
	VMOVDQU32 Z16, 384(DI)
	VMOVDQU32 Z17, 448(DI)
	VMOVDQU32 Z18, 512(DI)
	VMOVDQU32 Z19, 576(DI)
	VMOVDQU32 Z20, 640(DI)
	VMOVDQU32 Z21, 704(DI)
	VZEROUPPER
	RET

// func peakAVXVNNI(n int, u, s uint32, out *[96]int32)
// Twelve chains of VEX VPDPBUSD on ymm registers: 12 × 32 multiply-adds
// an iteration.
TEXT ·peakAVXVNNI(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVL u+8(FP), AX
	MOVL s+12(FP), DX
	MOVQ out+16(FP), DI
	MOVQ AX, X0
	VPBROADCASTD X0, Y0
	MOVQ DX, X1
	VPBROADCASTD X1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	TESTQ CX, CX
	JLE donevnni
loopvnni:
	VPDPBUSDY(2, 0, 1)
	VPDPBUSDY(3, 0, 1)
	VPDPBUSDY(4, 0, 1)
	VPDPBUSDY(5, 0, 1)
	VPDPBUSDY(6, 0, 1)
	VPDPBUSDY(7, 0, 1)
	VPDPBUSDY(8, 0, 1)
	VPDPBUSDY(9, 0, 1)
	VPDPBUSDY(10, 0, 1)
	VPDPBUSDY(11, 0, 1)
	VPDPBUSDY(12, 0, 1)
	VPDPBUSDY(13, 0, 1)
	DECQ CX
	JNZ loopvnni
donevnni:
	VMOVDQU Y2, 0(DI)
	VMOVDQU Y3, 32(DI)
	VMOVDQU Y4, 64(DI)
	VMOVDQU Y5, 96(DI)
	VMOVDQU Y6, 128(DI)
	VMOVDQU Y7, 160(DI)
	VMOVDQU Y8, 192(DI)
	VMOVDQU Y9, 224(DI)
	VMOVDQU Y10, 256(DI)
	VMOVDQU Y11, 288(DI)
	VMOVDQU Y12, 320(DI)
	VMOVDQU Y13, 352(DI)
	VZEROUPPER
	RET

// func peakAVX2(n int, u, s uint32, out *[48]int32)
// Six chains of the AVX2 sequence the engine's and llama.cpp's AVX2
// kernels use for a dot product of bytes: VPMADDUBSW (pairs of u×s to
// int16), VPMADDWD by ones (pairs of int16 to int32), VPADDD into the
// accumulator: 6 × 32 multiply-adds an iteration.
TEXT ·peakAVX2(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVL u+8(FP), AX
	MOVL s+12(FP), DX
	MOVQ out+16(FP), DI
	MOVQ AX, X0
	VPBROADCASTD X0, Y0
	MOVQ DX, X1
	VPBROADCASTD X1, Y1
	MOVL $0x00010001, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	TESTQ CX, CX
	JLE doneavx2
loopavx2:
	VPMADDUBSW Y1, Y0, Y8
	VPMADDUBSW Y1, Y0, Y9
	VPMADDUBSW Y1, Y0, Y10
	VPMADDUBSW Y1, Y0, Y11
	VPMADDUBSW Y1, Y0, Y12
	VPMADDUBSW Y1, Y0, Y13
	VPMADDWD Y15, Y8, Y8
	VPMADDWD Y15, Y9, Y9
	VPMADDWD Y15, Y10, Y10
	VPMADDWD Y15, Y11, Y11
	VPMADDWD Y15, Y12, Y12
	VPMADDWD Y15, Y13, Y13
	VPADDD Y8, Y2, Y2
	VPADDD Y9, Y3, Y3
	VPADDD Y10, Y4, Y4
	VPADDD Y11, Y5, Y5
	VPADDD Y12, Y6, Y6
	VPADDD Y13, Y7, Y7
	DECQ CX
	JNZ loopavx2
doneavx2:
	VMOVDQU Y2, 0(DI)
	VMOVDQU Y3, 32(DI)
	VMOVDQU Y4, 64(DI)
	VMOVDQU Y5, 96(DI)
	VMOVDQU Y6, 128(DI)
	VMOVDQU Y7, 160(DI)
	VZEROUPPER
	RET
