// SwiGLU kernels (glu.go): h[i] = silu(h[i]) · u[i], with silu(x) =
// x / (1 + e) for x ≥ 0 and x·e / (1 + e) for x < 0, e = expf(−|x|) in
// attnExp's operations (the same constants and order), or 0 where −|x|
// is below expf's range. DO NOT reorder
// the float operations: every result equals swigluGo's bit for bit.

#include "textflag.h"
#include "expf_amd64.h"

// func swigluAVX512(h, u *float32, n int)
// 16 values at a time, the last partial 16 under a mask (masked loads
// do not touch the memory past n).
TEXT ·swigluAVX512(SB), NOSPLIT, $0-24
	MOVQ h+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	EXPF_CONSTS512
	MOVL $0x80000000, AX; VPBROADCASTD AX, Z17 // the sign bit
	VPXORD Z16, Z16, Z16
	MOVQ $0xFFFF, AX
	KMOVW AX, K1

gloop:
	CMPQ CX, $16
	JGE gfull
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVW AX, K1

gfull:
	VMOVUPS.Z (DI), K1, Z0 // x
	VPORD Z17, Z0, Z1      // −|x|
	VCMPPS $1, Z20, Z1, K3 // −|x| < lo: e is 0 there
	EXPF512
	VMULPS Z3, Z7, Z7      // e
	VMOVAPS Z16, K3, Z7
	VMULPS Z7, Z0, Z8      // x·e
	VCMPPS $1, Z16, Z0, K2 // x < 0
	VMOVAPS Z8, K2, Z0     // num: x·e where x < 0, else x
	VADDPS Z19, Z7, Z7     // 1 + e
	VDIVPS Z7, Z0, Z0      // silu
	VMOVUPS.Z (SI), K1, Z9
	VMULPS Z9, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JG gloop
	VZEROUPPER
	RET

// func swigluAVX2(h, u *float32, n int, consts *float32)
// 8 values at a time (n a multiple of 8); R11 points at attnConsts.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ h+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ consts+24(FP), R11
	VPCMPEQD Y15, Y15, Y15
	VPSLLD $31, Y15, Y15 // the sign bit
	VXORPS Y14, Y14, Y14

g2loop:
	VMOVUPS (DI), Y0 // x
	VORPS Y15, Y0, Y1 // −|x|
	VCMPPS $1, 0(R11), Y1, Y10 // −|x| < lo: e is 0 there
	EXPF256
	VMULPS Y3, Y7, Y7 // e
	VANDNPS Y7, Y10, Y7
	VMULPS Y7, Y0, Y8         // x·e
	VCMPPS $1, Y14, Y0, Y9    // x < 0
	VBLENDVPS Y9, Y8, Y0, Y0  // num
	VADDPS 320(R11), Y7, Y7   // 1 + e
	VDIVPS Y7, Y0, Y0         // silu
	VMULPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ g2loop
	VZEROUPPER
	RET
