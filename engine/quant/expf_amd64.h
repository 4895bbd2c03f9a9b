// expf (attn.go) in assembly, one definition for the attention and
// SwiGLU kernels.
//
// EXPF_CONSTS512: expf's constants (attn.go: expLo … expP5, 1, and the exponent bias
// 127) broadcast into AVX-512 registers, where attnExp and swigluAVX512
// read them: Z20 lo, Z21 log2e, Z22 c1, Z23 c2, Z24-Z29 p0-p5, Z19 1,
// Z18 127 (an integer). Uses AX.
#define EXPF_CONSTS512 \
	MOVL $0xC2AE0000, AX; VPBROADCASTD AX, Z20; \
	MOVL $0x3FB8AA3B, AX; VPBROADCASTD AX, Z21; \
	MOVL $0x3F318000, AX; VPBROADCASTD AX, Z22; \
	MOVL $0xB95E8083, AX; VPBROADCASTD AX, Z23; \
	MOVL $0x39506967, AX; VPBROADCASTD AX, Z24; \
	MOVL $0x3AB743CE, AX; VPBROADCASTD AX, Z25; \
	MOVL $0x3C088908, AX; VPBROADCASTD AX, Z26; \
	MOVL $0x3D2AA9C1, AX; VPBROADCASTD AX, Z27; \
	MOVL $0x3E2AAAAA, AX; VPBROADCASTD AX, Z28; \
	MOVL $0x3F000000, AX; VPBROADCASTD AX, Z29; \
	MOVL $0x3F800000, AX; VPBROADCASTD AX, Z19; \
	MOVL $127, AX; VPBROADCASTD AX, Z18

// EXPF512 leaves in Z7 expf(Z1) without its last multiply, and 2^n in
// Z3 (the caller multiplies: VMULPS Z3, Z7, Z7, masked or not), for Z1
// ≤ 0; Z1, Z2, Z4-Z6 are overwritten. The constants are
// EXPF_CONSTS512's; the order of operations is expf's.
#define EXPF512 \
	VMAXPS Z20, Z1, Z1; VMULPS Z21, Z1, Z2; VCVTPS2DQ Z2, Z3; VCVTDQ2PS Z3, Z4; \
	VMULPS Z22, Z4, Z5; VSUBPS Z5, Z1, Z1; VMULPS Z23, Z4, Z5; VSUBPS Z5, Z1, Z1; \
	VMULPS Z1, Z1, Z6; \
	VMULPS Z24, Z1, Z7; VADDPS Z25, Z7, Z7; \
	VMULPS Z1, Z7, Z7; VADDPS Z26, Z7, Z7; \
	VMULPS Z1, Z7, Z7; VADDPS Z27, Z7, Z7; \
	VMULPS Z1, Z7, Z7; VADDPS Z28, Z7, Z7; \
	VMULPS Z1, Z7, Z7; VADDPS Z29, Z7, Z7; \
	VMULPS Z6, Z7, Z7; VADDPS Z1, Z7, Z7; VADDPS Z19, Z7, Z7; \
	VPADDD Z18, Z3, Z3; VPSLLD $23, Z3, Z3

// EXPF256 is EXPF512 on ymm registers (Y1 in, Y7 and 2^n in Y3 out,
// Y2, Y4-Y6 overwritten), the constants read from memory at R11
// (attnConsts: 8 copies each of lo, log2e, c1, c2, p0…p5, 1, 127).
#define EXPF256 \
	VMAXPS 0(R11), Y1, Y1; \
	VMULPS 32(R11), Y1, Y2; VCVTPS2DQ Y2, Y3; VCVTDQ2PS Y3, Y4; \
	VMULPS 64(R11), Y4, Y5; VSUBPS Y5, Y1, Y1; VMULPS 96(R11), Y4, Y5; VSUBPS Y5, Y1, Y1; \
	VMULPS Y1, Y1, Y6; \
	VMULPS 128(R11), Y1, Y7; VADDPS 160(R11), Y7, Y7; \
	VMULPS Y1, Y7, Y7; VADDPS 192(R11), Y7, Y7; \
	VMULPS Y1, Y7, Y7; VADDPS 224(R11), Y7, Y7; \
	VMULPS Y1, Y7, Y7; VADDPS 256(R11), Y7, Y7; \
	VMULPS Y1, Y7, Y7; VADDPS 288(R11), Y7, Y7; \
	VMULPS Y6, Y7, Y7; VADDPS Y1, Y7, Y7; VADDPS 320(R11), Y7, Y7; \
	VPADDD 352(R11), Y3, Y3; VPSLLD $23, Y3, Y3
