// AVX-512 repacking of one 16-row group into the Packed layout (pack.go):
// per 32-value block, one masked VPGATHERDD per 4 bytes of a row's block
// takes the same dword of the 16 rows at once, which is one register of
// the layout (Q8_0), or two of them after a few shifts and masks (Q4).
// Lanes of rows past the matrix (padding) are masked off and stay zero,
// as in packGroup, whose output this equals bit for bit.
//
// Registers: SI the group's first row at the current block, DI the
// packed block, CX blocks left, Z29 the rows' byte offsets, K1 the rows
// present, Z31 0x0F nibble mask, Z30 0xF0, Z28 0x80.

#include "textflag.h"

// GATHER loads the dword at byte off of each present row's block into z
// (zero in the other lanes).
#define GATHER(off, z) \
	KMOVW K1, K2; VPXORD z, z, z; VPGATHERDD off(SI)(Z29*1), K2, z

#define ARGS \
	MOVQ src+0(FP), SI; MOVQ idx+8(FP), AX; VMOVDQU32 (AX), Z29; \
	MOVQ mask+16(FP), AX; KMOVW AX, K1; MOVQ dst+24(FP), DI; MOVQ nb+32(FP), CX; \
	MOVL $0x0F0F0F0F, AX; VPBROADCASTD AX, Z31; \
	MOVL $0xF0F0F0F0, AX; VPBROADCASTD AX, Z30; \
	MOVL $0x80808080, AX; VPBROADCASTD AX, Z28

// Q4NIB packs the 16 bytes of nibbles at off of each row into the four
// registers of the layout at DI+w.
#define Q4NIB(off, w) \
	GATHER(off, Z1); GATHER(off+4, Z2); GATHER(off+8, Z3); GATHER(off+12, Z4); \
	VPANDD Z31, Z1, Z5; VPSLLD $4, Z2, Z6; VPANDD Z30, Z6, Z6; VPORD Z6, Z5, Z5; VMOVDQU64 Z5, w(DI); \
	VPANDD Z31, Z3, Z5; VPSLLD $4, Z4, Z6; VPANDD Z30, Z6, Z6; VPORD Z6, Z5, Z5; VMOVDQU64 Z5, w+64(DI); \
	VPSRLD $4, Z1, Z5; VPANDD Z31, Z5, Z5; VPANDD Z30, Z2, Z6; VPORD Z6, Z5, Z5; VMOVDQU64 Z5, w+128(DI); \
	VPSRLD $4, Z3, Z5; VPANDD Z31, Z5, Z5; VPANDD Z30, Z4, Z6; VPORD Z6, Z5, Z5; VMOVDQU64 Z5, w+192(DI)

// func packQ8_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)
TEXT ·packQ8_0AVX512(SB), NOSPLIT, $0-40
	ARGS
packQ8_0block:
	GATHER(0, Z0)
	VPMOVDW Z0, Y0
	VMOVDQU Y0, (DI)
	GATHER(2, Z1)
	VPXORD Z28, Z1, K1, Z1
	VMOVDQU64 Z1, 32(DI)
	GATHER(6, Z2)
	VPXORD Z28, Z2, K1, Z2
	VMOVDQU64 Z2, 96(DI)
	GATHER(10, Z3)
	VPXORD Z28, Z3, K1, Z3
	VMOVDQU64 Z3, 160(DI)
	GATHER(14, Z4)
	VPXORD Z28, Z4, K1, Z4
	VMOVDQU64 Z4, 224(DI)
	GATHER(18, Z5)
	VPXORD Z28, Z5, K1, Z5
	VMOVDQU64 Z5, 288(DI)
	GATHER(22, Z6)
	VPXORD Z28, Z6, K1, Z6
	VMOVDQU64 Z6, 352(DI)
	GATHER(26, Z7)
	VPXORD Z28, Z7, K1, Z7
	VMOVDQU64 Z7, 416(DI)
	GATHER(30, Z8)
	VPXORD Z28, Z8, K1, Z8
	VMOVDQU64 Z8, 480(DI)
	ADDQ $34, SI
	ADDQ $544, DI
	DECQ CX
	JNZ packQ8_0block
	VZEROUPPER
	RET

// func packQ4_0AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)
TEXT ·packQ4_0AVX512(SB), NOSPLIT, $0-40
	ARGS
packQ4_0block:
	GATHER(0, Z0)
	VPMOVDW Z0, Y0
	VMOVDQU Y0, (DI)
	Q4NIB(2, 32)
	ADDQ $18, SI
	ADDQ $288, DI
	DECQ CX
	JNZ packQ4_0block
	VZEROUPPER
	RET

// func packQ4_1AVX512(src *byte, idx *[16]int32, mask int, dst *byte, nb int)
// (Q4_1 and Q4_1BF16: the scale and minimum are copied as bits)
TEXT ·packQ4_1AVX512(SB), NOSPLIT, $0-40
	ARGS
packQ4_1block:
	GATHER(0, Z0)
	VPMOVDW Z0, Y1
	VMOVDQU Y1, (DI)
	VPSRLD $16, Z0, Z0
	VPMOVDW Z0, Y1
	VMOVDQU Y1, 32(DI)
	Q4NIB(4, 64)
	ADDQ $20, SI
	ADDQ $320, DI
	DECQ CX
	JNZ packQ4_1block
	VZEROUPPER
	RET
