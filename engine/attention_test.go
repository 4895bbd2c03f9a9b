package engine

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAttentionBlocks: with the key cache in blocks of 16 positions, a
// prompt longer than a prefill batch (several blocks, a partial last
// one) prefilled at once, token by token, or rewound into the middle of
// a block and continued gives the same logits bit for bit, for both
// cache types, at every SIMD level (each with its attention kernels); and
// avx512, avxvnni and avx2 give the same logits as none (the plain-Go
// twins).
func TestAttentionBlocks(t *testing.T) {
	w := randomWeights(t, 26, testmodel.MiniCPM5Small()) // 16 query heads, 2 KV heads
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 45) // past a batch of 32, last block partial
	for i := range prompt {
		prompt[i] = (i*37 + 11) % 512
	}
	for _, f16 := range []bool{false, true} {
		var base []float32
		for _, lvl := range []string{SIMDNone, SIMDAVX2, SIMDAVXVNNI, SIMDAVX512} {
			m := loadT(t, p, LoadOptions{Threads: 2, SIMD: lvl, KVF16: f16})
			steps := logitsOf(t, m, prompt)
			s := m.NewSession(0)
			got, err := s.Prefill(prompt)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "prefill vs token by token", got, steps[len(prompt)-1])
			// the level that ran, not the one asked for: a CPU without
			// AVX-512 or AVX-VNNI runs a lower level's kernels
			switch m.SIMD() {
			case SIMDNone:
				if lvl == SIMDNone {
					base = append([]float32(nil), got...)
				}
			case SIMDAVX2, SIMDAVXVNNI, SIMDAVX512:
				same(t, m.SIMD()+" vs none", got, base)
			}
			// rewind into a block (19 = 16+3) and into the first (5),
			// then continue with other tokens: as a fresh session would
			for _, n := range []int{19, 5, 32} {
				if err := s.Rewind(n); err != nil {
					t.Fatal(err)
				}
				cont := []int{7, 300, 12, 9, 200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
				got, err := s.Prefill(cont)
				if err != nil {
					t.Fatal(err)
				}
				want := logitsOf(t, m, append(append([]int(nil), prompt[:n]...), cont...))
				same(t, fmt.Sprintf("after rewind to %d", n), got, want[len(want)-1])
				// back to the whole prompt for the next rewind
				if err := s.Rewind(0); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Prefill(prompt); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("f16 %v %s: model SIMD %s", f16, lvl, m.SIMD())
		}
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for j := range want {
		if got[j] != want[j] {
			t.Fatalf("%s: logit %d = %v, want %v", what, j, got[j], want[j])
		}
	}
}
