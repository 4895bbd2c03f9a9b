// AVX2+FMA dot products of quantized weight rows with Q8 activations
// (ggml's ggml_vec_dot_q8_0_q8_0, _q4_0_q8_0 and _q4_1_q8_1 for AVX2,
// ggml-cpu/arch/x86/quants.c), for one activation vector (…x1) or four at
// once (…x4, prefill: each weight block is loaded and unpacked once for
// four tokens), and of float32 vectors. Per 32-value block and vector:
// VPMADDUBSW (unsigned × signed bytes → int16 pairs), VPMADDWD with ones
// (→ 8 int32), convert to float, multiply-add with the block's scale
// into 8 float lanes; a horizontal sum at the end. The x1 and x4 kernels
// do the same operations in the same order for each vector, so their
// results are identical bit for bit.
//
// Registers: Y0-Y3 dot accumulators (one per vector), X4-X7 Q4_1 minimum
// accumulators, Y8 weight bytes, X9 weight scale, X10 weight minimum (Q4_1)
// or Y10 bytes of 8 (Q4_0), Y11 and Y13 temporaries, Y12 |weights|,
// Y14 bytes of 0x0F, Y15 int16 ones. SI weights, DI activation bytes,
// DX activation scales, BX activation sums, R8 = n (bytes between
// vectors' values), R9 = 3n, R10 = 4·nb (bytes between vectors' scales),
// R11 = 3·R10, CX blocks left.

#include "textflag.h"

#define CONSTS \
	MOVL $0x00010001, AX; VMOVD AX, X15; VPBROADCASTD X15, Y15; \
	MOVL $0x0F0F0F0F, AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	MOVL $0x08080808, AX; VMOVD AX, X10; VPBROADCASTD X10, Y10

// F16 loads the float16 at addr into xr's low lane as float32.
#define F16(addr, xr) MOVWLZX addr, AX; VMOVD AX, xr; VCVTPH2PS xr, xr

// F16PAIR and BF16PAIR load a Q4_1 block's scale d and minimum m (two
// float16 / bfloat16 at addr) as float32: d into X9's low lane, m into X10's.
#define F16PAIR(addr) VMOVD addr, X9; VCVTPH2PS X9, X9; VMOVSHDUP X9, X10
#define BF16PAIR(addr) VPMOVZXWD addr, X9; VPSLLD $16, X9, X9; VMOVSHDUP X9, X10

// NIBBLES expands the 16 bytes at addr into Y8: low nibbles (values
// 0..15 of the block) then high nibbles (16..31), as ggml orders them.
#define NIBBLES(addr) \
	VMOVDQU addr, X8; VPSRLW $4, X8, X11; VINSERTI128 $1, X11, Y8, Y8; VPAND Y14, Y8, Y8

// SDOT: acc += (X9 × d) · Σ pairs of w·y for the signed weights in Y8
// (|w| in Y12) and the activation bytes at qy.
#define SDOT(qy, d, acc) \
	VMOVDQU qy, Y11; VPSIGNB Y8, Y11, Y11; VPMADDUBSW Y11, Y12, Y11; VPMADDWD Y15, Y11, Y11; \
	VCVTDQ2PS Y11, Y11; VMULSS d, X9, X13; VBROADCASTSS X13, Y13; VFMADD231PS Y13, Y11, acc

// UDOT is SDOT for the unsigned nibbles in Y8, plus min += X10 × s.
#define UDOT(qy, d, s, acc, min) \
	VMOVDQU qy, Y11; VPMADDUBSW Y11, Y8, Y11; VPMADDWD Y15, Y11, Y11; \
	VCVTDQ2PS Y11, Y11; VMULSS d, X9, X13; VBROADCASTSS X13, Y13; VFMADD231PS Y13, Y11, acc; \
	VFMADD231SS s, X10, min

// HSUM reduces the 8 lanes of yr into the low lane of xr.
#define HSUM(yr, xr) VEXTRACTF128 $1, yr, X11; VADDPS X11, xr, xr; VHADDPS xr, xr, xr; VHADDPS xr, xr, xr

#define ARGS1 \
	MOVQ w+0(FP), SI; MOVQ qs+8(FP), DI; MOVQ d+16(FP), DX
#define ZERO4 \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS X4, X4, X4; VXORPS X5, X5, X5; VXORPS X6, X6, X6; VXORPS X7, X7, X7
#define STRIDES \
	MOVQ CX, R10; SHLQ $2, R10; LEAQ (R10)(R10*2), R11; \
	MOVQ CX, R8; SHLQ $5, R8; LEAQ (R8)(R8*2), R9
#define STORE4 \
	MOVQ out+40(FP), AX; \
	HSUM(Y0, X0); VADDSS X4, X0, X0; VMOVSS X0, 0(AX); \
	HSUM(Y1, X1); VADDSS X5, X1, X1; VMOVSS X1, 4(AX); \
	HSUM(Y2, X2); VADDSS X6, X2, X2; VMOVSS X2, 8(AX); \
	HSUM(Y3, X3); VADDSS X7, X3, X3; VMOVSS X3, 12(AX)

// func dotQ8_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ8_0Q8x1(SB), NOSPLIT, $0-36
	ARGS1
	MOVQ nb+24(FP), CX
	CONSTS
	ZERO4
	CMPQ CX, $2
	JLT dotQ8_0Q8x1tail
dotQ8_0Q8x1loop:
	F16((SI), X9)
	VMOVDQU 2(SI), Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
	F16(34(SI), X9)
	VMOVDQU 36(SI), Y8
	VPSIGNB Y8, Y8, Y12
	SDOT(32(DI), 4(DX), Y0)
	ADDQ $68, SI
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE dotQ8_0Q8x1loop
dotQ8_0Q8x1tail:
	TESTQ CX, CX
	JEQ dotQ8_0Q8x1done
	F16((SI), X9)
	VMOVDQU 2(SI), Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
dotQ8_0Q8x1done:
	HSUM(Y0, X0)
	VADDSS X4, X0, X0
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ8_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)
// s is unused (the signature matches the Q4_1 kernels').
TEXT ·dotQ8_0Q8x4(SB), NOSPLIT, $0-48
	ARGS1
	MOVQ nb+32(FP), CX
	STRIDES
	CONSTS
	ZERO4
dotQ8_0Q8x4loop:
	F16((SI), X9)
	VMOVDQU 2(SI), Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
	SDOT((DI)(R8*1), (DX)(R10*1), Y1)
	SDOT((DI)(R8*2), (DX)(R10*2), Y2)
	SDOT((DI)(R9*1), (DX)(R11*1), Y3)
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ dotQ8_0Q8x4loop
	STORE4
	VZEROUPPER
	RET

// func dotQ4_0Q8x1(w *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotQ4_0Q8x1(SB), NOSPLIT, $0-36
	ARGS1
	MOVQ nb+24(FP), CX
	CONSTS
	ZERO4
	CMPQ CX, $2
	JLT dotQ4_0Q8x1tail
dotQ4_0Q8x1loop:
	F16((SI), X9)
	NIBBLES(2(SI)); VPSUBB Y10, Y8, Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
	F16(18(SI), X9)
	NIBBLES(20(SI)); VPSUBB Y10, Y8, Y8
	VPSIGNB Y8, Y8, Y12
	SDOT(32(DI), 4(DX), Y0)
	ADDQ $36, SI
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE dotQ4_0Q8x1loop
dotQ4_0Q8x1tail:
	TESTQ CX, CX
	JEQ dotQ4_0Q8x1done
	F16((SI), X9)
	NIBBLES(2(SI)); VPSUBB Y10, Y8, Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
dotQ4_0Q8x1done:
	HSUM(Y0, X0)
	VADDSS X4, X0, X0
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ4_0Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)
// s is unused (the signature matches the Q4_1 kernels').
TEXT ·dotQ4_0Q8x4(SB), NOSPLIT, $0-48
	ARGS1
	MOVQ nb+32(FP), CX
	STRIDES
	CONSTS
	ZERO4
dotQ4_0Q8x4loop:
	F16((SI), X9)
	NIBBLES(2(SI)); VPSUBB Y10, Y8, Y8
	VPSIGNB Y8, Y8, Y12
	SDOT((DI), (DX), Y0)
	SDOT((DI)(R8*1), (DX)(R10*1), Y1)
	SDOT((DI)(R8*2), (DX)(R10*2), Y2)
	SDOT((DI)(R9*1), (DX)(R11*1), Y3)
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ dotQ4_0Q8x4loop
	STORE4
	VZEROUPPER
	RET

// func dotQ4_1Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ4_1Q8x1(SB), NOSPLIT, $0-44
	ARGS1
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	CONSTS
	ZERO4
	CMPQ CX, $2
	JLT dotQ4_1Q8x1tail
dotQ4_1Q8x1loop:
	F16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
	F16PAIR(20(SI))
	NIBBLES(24(SI))
	UDOT(32(DI), 4(DX), 4(BX), Y0, X4)
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE dotQ4_1Q8x1loop
dotQ4_1Q8x1tail:
	TESTQ CX, CX
	JEQ dotQ4_1Q8x1done
	F16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
dotQ4_1Q8x1done:
	HSUM(Y0, X0)
	VADDSS X4, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ4_1Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)
TEXT ·dotQ4_1Q8x4(SB), NOSPLIT, $0-48
	ARGS1
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	STRIDES
	CONSTS
	ZERO4
dotQ4_1Q8x4loop:
	F16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
	UDOT((DI)(R8*1), (DX)(R10*1), (BX)(R10*1), Y1, X5)
	UDOT((DI)(R8*2), (DX)(R10*2), (BX)(R10*2), Y2, X6)
	UDOT((DI)(R9*1), (DX)(R11*1), (BX)(R11*1), Y3, X7)
	ADDQ $20, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ dotQ4_1Q8x4loop
	STORE4
	VZEROUPPER
	RET

// func dotQ4_1BF16Q8x1(w *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ4_1BF16Q8x1(SB), NOSPLIT, $0-44
	ARGS1
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	CONSTS
	ZERO4
	CMPQ CX, $2
	JLT dotQ4_1BF16Q8x1tail
dotQ4_1BF16Q8x1loop:
	BF16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
	BF16PAIR(20(SI))
	NIBBLES(24(SI))
	UDOT(32(DI), 4(DX), 4(BX), Y0, X4)
	ADDQ $40, SI
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE dotQ4_1BF16Q8x1loop
dotQ4_1BF16Q8x1tail:
	TESTQ CX, CX
	JEQ dotQ4_1BF16Q8x1done
	BF16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
dotQ4_1BF16Q8x1done:
	HSUM(Y0, X0)
	VADDSS X4, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ4_1BF16Q8x4(w *byte, qs *int8, d, s *float32, nb int, out *[4]float32)
TEXT ·dotQ4_1BF16Q8x4(SB), NOSPLIT, $0-48
	ARGS1
	MOVQ s+24(FP), BX
	MOVQ nb+32(FP), CX
	STRIDES
	CONSTS
	ZERO4
dotQ4_1BF16Q8x4loop:
	BF16PAIR((SI))
	NIBBLES(4(SI))
	UDOT((DI), (DX), (BX), Y0, X4)
	UDOT((DI)(R8*1), (DX)(R10*1), (BX)(R10*1), Y1, X5)
	UDOT((DI)(R8*2), (DX)(R10*2), (BX)(R10*2), Y2, X6)
	UDOT((DI)(R9*1), (DX)(R11*1), (BX)(R11*1), Y3, X7)
	ADDQ $20, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ dotQ4_1BF16Q8x4loop
	STORE4
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
	HSUM(Y0, X0)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyF32AVX2(y, x *float32, a float32, n int)
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ n+24(FP), CX
axpyloop32:
	CMPQ CX, $32
	JLT axpyloop8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP axpyloop32
axpyloop8:
	CMPQ CX, $8
	JLT axpydone
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP axpyloop8
axpydone:
	VZEROUPPER
	RET

// func dotF16AVX2(a *float32, b *uint16, n int) float32
// Σ a[i]·b[i] with b float16 (F16C), n a multiple of 8.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $32
	JLT f16tail
f16loop:
	VCVTPH2PS (DI), Y4
	VCVTPH2PS 16(DI), Y5
	VCVTPH2PS 32(DI), Y6
	VCVTPH2PS 48(DI), Y7
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE f16loop
f16tail:
	CMPQ CX, $8
	JLT f16done
	VCVTPH2PS (DI), Y4
	VFMADD231PS (SI), Y4, Y0
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JMP f16tail
f16done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyF16AVX2(y *float32, x *uint16, a float32, n int)
// y[i] += a·x[i] with x float16, n a multiple of 8.
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ n+24(FP), CX
axpyh32:
	CMPQ CX, $32
	JLT axpyh8
	VCVTPH2PS (SI), Y5
	VCVTPH2PS 16(SI), Y6
	VCVTPH2PS 32(SI), Y7
	VCVTPH2PS 48(SI), Y8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS Y5, Y0, Y1
	VFMADD231PS Y6, Y0, Y2
	VFMADD231PS Y7, Y0, Y3
	VFMADD231PS Y8, Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP axpyh32
axpyh8:
	CMPQ CX, $8
	JLT axpyhdone
	VCVTPH2PS (SI), Y5
	VMOVUPS (DI), Y1
	VFMADD231PS Y5, Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP axpyh8
axpyhdone:
	VZEROUPPER
	RET
