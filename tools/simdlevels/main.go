// Command simdlevels prints the SIMD levels of the engine's ladder
// (engine/simd) that this CPU runs, highest first, one line each, and
// on stderr those it lacks and why. `make test` (scripts/test-ceilings)
// runs the engine's tests again under $NPUCHAT_CPU_CEILING at each level
// it prints below the first.
//
//	$ go run ./tools/simdlevels
//	avx2
//	none
//	avx512: CPU lacks AVX-512F, AVX-512BW, AVX-512VL, AVX-512VNNI
//	avxvnni: CPU lacks AVX-VNNI
package main

import (
	"fmt"
	"os"

	"github.com/npuchat/npuchat/engine/simd"
)

func main() {
	cpu := simd.Host()
	for l := simd.Top; l >= simd.None; l-- {
		if cpu.Has(l) {
			fmt.Println(l)
		} else {
			fmt.Fprintf(os.Stderr, "%s: CPU %s\n", l, cpu.Lacks(l))
		}
	}
}
