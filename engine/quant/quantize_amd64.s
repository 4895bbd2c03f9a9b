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

// permd is VPERMD's order that undoes VPACKSSDW/VPACKSSWB's interleaving
// of 128-bit lanes (quantizeQ8AVX2).
DATA permd<>+0(SB)/4, $0
DATA permd<>+4(SB)/4, $4
DATA permd<>+8(SB)/4, $1
DATA permd<>+12(SB)/4, $5
DATA permd<>+16(SB)/4, $2
DATA permd<>+20(SB)/4, $6
DATA permd<>+24(SB)/4, $3
DATA permd<>+28(SB)/4, $7
GLOBL permd<>(SB), RODATA|NOPTR, $32

// func quantizeQ8AVX2(x *float32, nb int, qs *int8, d, s *float32, sum *int32)
// The same operations as quantizeQ8AVX512 in 256-bit registers (AVX2,
// F16C): the rounded values are cut to their low bytes (as VPMOVDB and
// Go's int8 conversion do, should a NaN give 0x80000000) by a mask and
// two unsigned saturating packs, which then change nothing, and put back
// in order by VPERMD.
TEXT ·quantizeQ8AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ s+32(FP), R8
	MOVQ sum+40(FP), R9
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X14
	VMOVDQU permd<>(SB), Y13
	MOVL $0xff, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	TESTQ CX, CX
	JEQ q2done
q2loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VANDPS Y15, Y2, Y6
	VANDPS Y15, Y3, Y7
	VMAXPS Y5, Y4, Y4
	VMAXPS Y7, Y6, Y6
	VMAXPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4 // amax
	VDIVSS X14, X4, X8 // d = amax / 127
	VXORPS X5, X5, X5
	VUCOMISS X5, X4
	JEQ q2zero
	VDIVSS X4, X14, X5 // id = 127 / amax
q2zero:
	VBROADCASTSS X5, Y5
	VMULPS Y5, Y0, Y0
	VMULPS Y5, Y1, Y1
	VMULPS Y5, Y2, Y2
	VMULPS Y5, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPADDD Y1, Y0, Y9
	VPADDD Y3, Y2, Y10
	VPADDD Y10, Y9, Y9
	VPAND Y12, Y0, Y0
	VPAND Y12, Y1, Y1
	VPAND Y12, Y2, Y2
	VPAND Y12, Y3, Y3
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD Y0, Y13, Y0
	VMOVDQU Y0, (DI)
	VEXTRACTI128 $1, Y9, X10
	VPADDD X10, X9, X9
	VPSHUFD $0x4e, X9, X10
	VPADDD X10, X9, X9
	VPSHUFD $0xb1, X9, X10
	VPADDD X10, X9, X9
	VMOVD X9, AX
	MOVL AX, (R9)
	VCVTSI2SSL AX, X6, X6 // float32(sum)
	VMULSS X6, X8, X6 // d·sum
	VCVTPS2PH $0, X8, X7
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
	JNZ q2loop
q2done:
	VZEROUPPER
	RET
