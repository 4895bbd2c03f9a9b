package quant

import (
	"fmt"

	"github.com/npuchat/npuchat/engine/simd"
)

// Every kernel entry point that has SIMD (Pack, Packed.MulQ8, Attn.Run,
// Q8Vector.Quantize, Q8Batch.Quantize, DotQ8, DotQ8x4, DotF32, AxpyF32,
// DotF32Row, DotF16, AxpyF16) takes a simd.Level and runs that level's
// kernels and no other: the level was resolved against the CPU once
// (simd.Resolve, at the engine's load), so none of them reads CPUID or
// falls back on its own. Where a level has no kernel of its own for
// something, the next level down's runs, by the fixed table written at
// each function (the avxvnni level packs with the avx2 packer, say), and
// what ran is reported where the caller records it (Pack's result). A
// level this CPU lacks is a bug in the caller, which mustHave turns into
// a panic naming it instead of an illegal instruction.

// hostHas is simd.Host().Has for each level, read once (mustHave runs
// once per row product).
var hostHas = func() (h [simd.NumLevels]bool) {
	for _, l := range simd.Levels() {
		h[l] = simd.Host().Has(l)
	}
	return h
}()

// mustHave panics when this CPU lacks level l.
func mustHave(what string, l simd.Level) {
	if l < 0 || int(l) >= simd.NumLevels || !hostHas[l] {
		lacks(what, l)
	}
}

// lacks is mustHave's panic, apart so that mustHave inlines.
func lacks(what string, l simd.Level) {
	panic(fmt.Sprintf("quant.%s: level %s on a CPU that %s (resolve levels with simd.Resolve)", what, l, simd.Host().Lacks(l)))
}
