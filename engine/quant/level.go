package quant

import (
	"fmt"

	"github.com/npuchat/npuchat/engine/simd"
)

// The kernels that take a simd.Level (Packed.MulQ8, Attn.Run,
// Q8Vector.QuantizeWith) run that level's kernels and no other: the
// level was resolved against the CPU once (simd.Resolve, at the engine's
// load), so they neither check CPUID nor fall back. A level this CPU
// lacks is a bug in the caller, which mustHave turns into a panic naming
// it instead of an illegal instruction.

// mustHave panics when this CPU lacks level l.
func mustHave(what string, l simd.Level) {
	if !simd.Host().Has(l) {
		panic(fmt.Sprintf("quant.%s: level %s on a CPU that %s (resolve levels with simd.Resolve)", what, l, simd.Host().Lacks(l)))
	}
}
