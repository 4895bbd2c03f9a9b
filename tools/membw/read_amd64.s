#include "textflag.h"

// func sumAsm(p *uint64, n int) uint64
// n is a multiple of 32 (256 bytes a step): sixteen 16-byte loads (SSE2,
// every x86-64 CPU) into four chains, and a prefetch 3 KB ahead for each
// of the step's four 64-byte lines, as the engine's decode kernels
// prefetch.
TEXT ·sumAsm(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	PXOR X0, X0
	PXOR X1, X1
	PXOR X2, X2
	PXOR X3, X3
	TESTQ CX, CX
	JEQ done
loop:
	PREFETCHT0 3072(SI)
	PREFETCHT0 3136(SI)
	PREFETCHT0 3200(SI)
	PREFETCHT0 3264(SI)
	MOVOU 0(SI), X4
	PADDQ X4, X0
	MOVOU 16(SI), X5
	PADDQ X5, X1
	MOVOU 32(SI), X6
	PADDQ X6, X2
	MOVOU 48(SI), X7
	PADDQ X7, X3
	MOVOU 64(SI), X4
	PADDQ X4, X0
	MOVOU 80(SI), X5
	PADDQ X5, X1
	MOVOU 96(SI), X6
	PADDQ X6, X2
	MOVOU 112(SI), X7
	PADDQ X7, X3
	MOVOU 128(SI), X4
	PADDQ X4, X0
	MOVOU 144(SI), X5
	PADDQ X5, X1
	MOVOU 160(SI), X6
	PADDQ X6, X2
	MOVOU 176(SI), X7
	PADDQ X7, X3
	MOVOU 192(SI), X4
	PADDQ X4, X0
	MOVOU 208(SI), X5
	PADDQ X5, X1
	MOVOU 224(SI), X6
	PADDQ X6, X2
	MOVOU 240(SI), X7
	PADDQ X7, X3
	ADDQ $256, SI
	DECQ CX
	JNZ loop
done:
	PADDQ X1, X0
	PADDQ X3, X2
	PADDQ X2, X0
	MOVQ X0, AX
	PSRLDQ $8, X0
	MOVQ X0, BX
	ADDQ BX, AX
	MOVQ AX, ret+16(FP)
	RET
