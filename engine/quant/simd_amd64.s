// AVX2+FMA dot products of quantized weight rows with Q8 activations
// (ggml's ggml_vec_dot_q8_0_q8_0, _q4_0_q8_0 and _q4_1_q8_1 for AVX2,
// ggml-cpu/arch/x86/quants.c), and of float32 vectors. Per 32-value
// block: VPMADDUBSW (unsigned × signed bytes → int16 pairs), VPMADDWD
// with ones (→ 8 int32), convert to float, multiply-add with the block's
// scale into 8 float lanes; a horizontal sum at the end. Two blocks per
// iteration into two accumulators hide the FMA latency.

#include "textflag.h"

// ONES16 sets Y15 to int16 ones, MASK0F Y14 to bytes 0x0F, EIGHTS Y13 to bytes 8.
#define CONSTS \
	MOVL $0x00010001, AX; VMOVD AX, X15; VPBROADCASTD X15, Y15; \
	MOVL $0x0F0F0F0F, AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	MOVL $0x08080808, AX; VMOVD AX, X13; VPBROADCASTD X13, Y13

// F16 loads the float16 at addr into the low lane of xr as a float32.
#define F16(addr, xr) MOVWLZX addr, AX; VMOVD AX, xr; VCVTPH2PS xr, xr

// BF16 loads the bfloat16 at addr into the low lane of xr as a float32.
#define BF16(addr, xr) MOVWLZX addr, AX; SHLL $16, AX; VMOVD AX, xr

// SIGNED_DOT sets yacc += ydd · float(Σ pairs of wq·yq) for signed bytes wq
// (clobbered) and yq (clobbered), using the sign trick (|w| × sign(y, w)).
#define SIGNED_DOT(wq, yq, ydd, yacc) \
	VPSIGNB wq, yq, yq; VPSIGNB wq, wq, wq; \
	VPMADDUBSW yq, wq, wq; VPMADDWD Y15, wq, wq; VCVTDQ2PS wq, wq; \
	VFMADD231PS ydd, wq, yacc

// UNSIGNED_DOT is SIGNED_DOT for unsigned bytes wq (no sign trick).
#define UNSIGNED_DOT(wq, yq, ydd, yacc) \
	VPMADDUBSW yq, wq, wq; VPMADDWD Y15, wq, wq; VCVTDQ2PS wq, wq; \
	VFMADD231PS ydd, wq, yacc

// NIBBLES expands the 16 bytes at addr into 32 values in yr: low nibbles
// (values 0..15) then high nibbles (16..31), as ggml's Q4 blocks order them.
#define NIBBLES(addr, xr, yr, xt) \
	VMOVDQU addr, xr; VPSRLW $4, xr, xt; VINSERTI128 $1, xt, yr, yr; VPAND Y14, yr, yr

// HSUM reduces the 8 lanes of Y0 to X0's low lane.
#define HSUM \
	VEXTRACTF128 $1, Y0, X1; VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; VHADDPS X0, X0, X0

// func dotQ8_0Q8AVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ8_0Q8AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	CMPQ CX, $2
	JLT q80tail
q80loop:
	F16((SI), X1)
	VMULSS (DX), X1, X1
	VBROADCASTSS X1, Y1
	VMOVDQU 2(SI), Y2
	VMOVDQU (DI), Y3
	SIGNED_DOT(Y2, Y3, Y1, Y0)
	F16(34(SI), X4)
	VMULSS 4(DX), X4, X4
	VBROADCASTSS X4, Y4
	VMOVDQU 36(SI), Y5
	VMOVDQU 32(DI), Y6
	SIGNED_DOT(Y5, Y6, Y4, Y8)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE q80loop
q80tail:
	TESTQ CX, CX
	JEQ q80done
	F16((SI), X1)
	VMULSS (DX), X1, X1
	VBROADCASTSS X1, Y1
	VMOVDQU 2(SI), Y2
	VMOVDQU (DI), Y3
	SIGNED_DOT(Y2, Y3, Y1, Y0)
q80done:
	VADDPS Y8, Y0, Y0
	HSUM
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ4_0Q8AVX2(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ4_0Q8AVX2(SB), NOSPLIT, $0-36
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	CMPQ CX, $2
	JLT q40tail
q40loop:
	F16((SI), X1)
	VMULSS (DX), X1, X1
	VBROADCASTSS X1, Y1
	NIBBLES(2(SI), X2, Y2, X9)
	VPSUBB Y13, Y2, Y2
	VMOVDQU (DI), Y3
	SIGNED_DOT(Y2, Y3, Y1, Y0)
	F16(18(SI), X4)
	VMULSS 4(DX), X4, X4
	VBROADCASTSS X4, Y4
	NIBBLES(20(SI), X5, Y5, X10)
	VPSUBB Y13, Y5, Y5
	VMOVDQU 32(DI), Y6
	SIGNED_DOT(Y5, Y6, Y4, Y8)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE q40loop
q40tail:
	TESTQ CX, CX
	JEQ q40done
	F16((SI), X1)
	VMULSS (DX), X1, X1
	VBROADCASTSS X1, Y1
	NIBBLES(2(SI), X2, Y2, X9)
	VPSUBB Y13, Y2, Y2
	VMOVDQU (DI), Y3
	SIGNED_DOT(Y2, Y3, Y1, Y0)
q40done:
	VADDPS Y8, Y0, Y0
	HSUM
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// Q41BODY is one Q4_1 block at SI/DI/DX/BX (scale loader SCALE), adding the
// scaled integer sum into yacc and the minimum × S into X12.
#define Q41BODY(SCALE, off, qoff, doff, yacc) \
	SCALE(off(SI), X1); \
	VMULSS doff(DX), X1, X1; \
	VBROADCASTSS X1, Y1; \
	SCALE(off+2(SI), X3); \
	VFMADD231SS doff(BX), X3, X12; \
	NIBBLES(off+4(SI), X2, Y2, X9); \
	VMOVDQU qoff(DI), Y3; \
	UNSIGNED_DOT(Y2, Y3, Y1, yacc)

// func dotQ4_1Q8AVX2(w *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ4_1Q8AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	VXORPS X12, X12, X12
	CMPQ CX, $2
	JLT q41tail
q41loop:
	Q41BODY(F16, 0, 0, 0, Y0)
	Q41BODY(F16, 20, 32, 4, Y8)
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE q41loop
q41tail:
	TESTQ CX, CX
	JEQ q41done
	Q41BODY(F16, 0, 0, 0, Y0)
q41done:
	VADDPS Y8, Y0, Y0
	HSUM
	VADDSS X12, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ4_1BF16Q8AVX2(w *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ4_1BF16Q8AVX2(SB), NOSPLIT, $0-44
	MOVQ w+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	CONSTS
	VXORPS Y0, Y0, Y0
	VXORPS Y8, Y8, Y8
	VXORPS X12, X12, X12
	CMPQ CX, $2
	JLT b41tail
b41loop:
	Q41BODY(BF16, 0, 0, 0, Y0)
	Q41BODY(BF16, 20, 32, 4, Y8)
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE b41loop
b41tail:
	TESTQ CX, CX
	JEQ b41done
	Q41BODY(BF16, 0, 0, 0, Y0)
b41done:
	VADDPS Y8, Y0, Y0
	HSUM
	VADDSS X12, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $32
	JLT f32tail
f32loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE f32loop
f32tail:
	CMPQ CX, $8
	JLT f32done
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP f32tail
f32done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
