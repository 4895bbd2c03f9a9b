// AVX2 repacking of one full 16-row group into the Packed layout
// (pack.go), for CPUs without AVX-512 (pack_amd64.s): per 32-value block,
// one VPGATHERDD per 4 bytes of a row's block and half of the group takes
// the same dword of 8 rows at once, which is one ymm half of a register
// of the layout (Q8_0, with the +128 as one VPXOR), or two of them after
// a few shifts and masks (Q4). The float16 scales (and Q4_1 minimums)
// are the low (high) halves of the gathered first dwords, masked and
// packed to words (VPACKUSDW, then VPERMQ to put the two halves' words in
// row order). Partial groups are left to packGroup, whose output this
// equals bit for bit.
//
// Registers: SI the group's first row at the current block, DI the
// packed block, CX blocks left, Y15 / Y14 the byte offsets of rows 0-7 /
// 8-15, Y13 0x0F nibble mask, Y12 0xF0, Y11 0x80, Y10 the gather mask.

#include "textflag.h"

// GATHER(off, idx, y) loads the dword at byte off of 8 rows' blocks
// (offsets in idx) into y.
#define GATHER(off, idx, y) \
	VPCMPEQD Y10, Y10, Y10; VPGATHERDD Y10, off(SI)(idx*1), y

#define ARGS \
	MOVQ src+0(FP), SI; MOVQ idx+8(FP), AX; VMOVDQU (AX), Y15; VMOVDQU 32(AX), Y14; \
	MOVQ dst+16(FP), DI; MOVQ nb+24(FP), CX; \
	MOVL $0x0F0F0F0F, AX; VMOVD AX, X13; VPBROADCASTD X13, Y13; \
	MOVL $0xF0F0F0F0, AX; VMOVD AX, X12; VPBROADCASTD X12, Y12; \
	MOVL $0x80808080, AX; VMOVD AX, X11; VPBROADCASTD X11, Y11; \
	MOVL $0x0000FFFF, AX; VMOVD AX, X9; VPBROADCASTD X9, Y9

// WORDS(y0, y1, w) stores the low words of the dwords of y0 (rows 0-7)
// and y1 (rows 8-15) as 16 words at w(DI), in row order (clobbers y0, y1).
#define WORDS(y0, y1, w) \
	VPAND Y9, y0, y0; VPAND Y9, y1, y1; VPACKUSDW y1, y0, y0; VPERMQ $0xD8, y0, y0; VMOVDQU y0, w(DI)

// Q8K(k) writes register k of a Q8_0 block (both halves).
#define Q8K(k) \
	GATHER(2+4*(k), Y15, Y0); VPXOR Y11, Y0, Y0; VMOVDQU Y0, (32+64*(k))(DI); \
	GATHER(2+4*(k), Y14, Y1); VPXOR Y11, Y1, Y1; VMOVDQU Y1, (64+64*(k))(DI)

// Q4HALF(off, idx, w) packs the 16 bytes of nibbles at off of 8 rows
// (offsets in idx) into the four registers' halves at DI+w.
#define Q4HALF(off, idx, w) \
	GATHER(off, idx, Y1); GATHER(off+4, idx, Y2); GATHER(off+8, idx, Y3); GATHER(off+12, idx, Y4); \
	VPAND Y13, Y1, Y5; VPSLLD $4, Y2, Y6; VPAND Y12, Y6, Y6; VPOR Y6, Y5, Y5; VMOVDQU Y5, w(DI); \
	VPAND Y13, Y3, Y5; VPSLLD $4, Y4, Y6; VPAND Y12, Y6, Y6; VPOR Y6, Y5, Y5; VMOVDQU Y5, w+64(DI); \
	VPSRLD $4, Y1, Y5; VPAND Y13, Y5, Y5; VPAND Y12, Y2, Y6; VPOR Y6, Y5, Y5; VMOVDQU Y5, w+128(DI); \
	VPSRLD $4, Y3, Y5; VPAND Y13, Y5, Y5; VPAND Y12, Y4, Y6; VPOR Y6, Y5, Y5; VMOVDQU Y5, w+192(DI)

// func packQ8_0AVX2(src *byte, idx *[16]int32, dst *byte, nb int)
TEXT ·packQ8_0AVX2(SB), NOSPLIT, $0-32
	ARGS
packQ8_0AVX2block:
	GATHER(0, Y15, Y0)
	GATHER(0, Y14, Y1)
	WORDS(Y0, Y1, 0)
	Q8K(0)
	Q8K(1)
	Q8K(2)
	Q8K(3)
	Q8K(4)
	Q8K(5)
	Q8K(6)
	Q8K(7)
	ADDQ $34, SI
	ADDQ $544, DI
	DECQ CX
	JNZ packQ8_0AVX2block
	VZEROUPPER
	RET

// func packQ4_0AVX2(src *byte, idx *[16]int32, dst *byte, nb int)
TEXT ·packQ4_0AVX2(SB), NOSPLIT, $0-32
	ARGS
packQ4_0AVX2block:
	GATHER(0, Y15, Y0)
	GATHER(0, Y14, Y1)
	WORDS(Y0, Y1, 0)
	Q4HALF(2, Y15, 32)
	Q4HALF(2, Y14, 64)
	ADDQ $18, SI
	ADDQ $288, DI
	DECQ CX
	JNZ packQ4_0AVX2block
	VZEROUPPER
	RET

// func packQ4_1AVX2(src *byte, idx *[16]int32, dst *byte, nb int)
// (Q4_1 and Q4_1BF16: the scale and minimum are copied as bits)
TEXT ·packQ4_1AVX2(SB), NOSPLIT, $0-32
	ARGS
packQ4_1AVX2block:
	GATHER(0, Y15, Y0)
	GATHER(0, Y14, Y1)
	VPSRLD $16, Y0, Y7
	VPSRLD $16, Y1, Y8
	WORDS(Y0, Y1, 0)
	WORDS(Y7, Y8, 32)
	Q4HALF(4, Y15, 64)
	Q4HALF(4, Y14, 96)
	ADDQ $20, SI
	ADDQ $320, DI
	DECQ CX
	JNZ packQ4_1AVX2block
	VZEROUPPER
	RET
