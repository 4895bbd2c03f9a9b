// AVX-512 rounding of activations to 8 bits (Q8Vector.Quantize), the
// same IEEE single-precision operations as the plain-Go loop, so the
// results are identical: per 32-value block amax = max|x|, d = amax/127,
// id = 127/amax (0 when amax is 0), q = round-half-even(x·id) (VCVTPS2DQ
// in the default rounding mode), D = float16(d), S = float16(d·Σq), Sum = Σq.

#include "textflag.h"

// func quantizeQ8AVX512(x *float32, nb int, qs *int8, d, s *float32, sum *int32)
TEXT ·quantizeQ8AVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ s+32(FP), R8
	MOVQ sum+40(FP), R9
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X30
	TESTQ CX, CX
	JEQ qdone
qloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VANDPS Z31, Z0, Z2
	VANDPS Z31, Z1, Z3
	VMAXPS Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS X3, X2, X2
	VMOVHLPS X2, X2, X3
	VMAXPS X3, X2, X2
	VMOVSHDUP X2, X3
	VMAXSS X3, X2, X2 // amax
	VDIVSS X30, X2, X4 // d = amax / 127
	VXORPS X5, X5, X5
	VUCOMISS X5, X2
	JEQ qzero
	VDIVSS X2, X30, X5 // id = 127 / amax
qzero:
	VBROADCASTSS X5, Z5
	VMULPS Z5, Z0, Z0
	VMULPS Z5, Z1, Z1
	VCVTPS2DQ Z0, Z0
	VCVTPS2DQ Z1, Z1
	VPMOVDB Z0, (DI)
	VPMOVDB Z1, 16(DI)
	VPADDD Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, (R9)
	VCVTSI2SSL AX, X6, X6 // float32(sum)
	VMULSS X6, X4, X6 // d·sum
	VCVTPS2PH $0, X4, X7
	VCVTPH2PS X7, X7
	VMOVSS X7, (DX)
	VCVTPS2PH $0, X6, X7
	VCVTPH2PS X7, X7
	VMOVSS X7, (R8)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ qloop
qdone:
	VZEROUPPER
	RET
