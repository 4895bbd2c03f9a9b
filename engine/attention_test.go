package engine

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestAttentionBlocks: with the key cache in blocks of 16 positions, a
// prompt longer than a prefill batch (several blocks, a partial last
// one) prefilled at once, token by token, or rewound into the middle of
// a block and continued gives the same logits bit for bit, for every
// KV cache type (f32, f16, q8_0), at every SIMD level the CPU has (each with its attention
// kernels; the others are skipped); and the levels whose matrices are
// packed (avx512, avxvnni, avx2) give the same logits as none (the
// plain-Go twins; a level on rows as stored would sum in another order).
func TestAttentionBlocks(t *testing.T) {
	write := func(shape testmodel.Shape) string {
		w := randomWeights(t, 26, shape)
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write(testmodel.MiniCPM5Small()) // 16 query heads, 2 KV heads
	// q8_0 needs a head dimension of 32 or more: 8 query heads of 32
	s32 := testmodel.MiniCPM5Small()
	s32.Heads, s32.HeadDim = 8, 32
	p32 := write(s32)
	prompt := make([]int, 45) // past a batch of 32, last block partial
	for i := range prompt {
		prompt[i] = (i*37 + 11) % 512
	}
	for _, typ := range KVTypes() {
		t.Run(typ, func(t *testing.T) {
			if typ == KVTypeQ8 {
				testAttentionBlocks(t, p32, prompt, typ)
				return
			}
			testAttentionBlocks(t, p, prompt, typ)
		})
	}
}

func testAttentionBlocks(t *testing.T, p string, prompt []int, typ string) {
	plain := logitsOf(t, loadT(t, p, LoadOptions{Threads: 2, SIMD: SIMDNone, KVCacheType: typ}), prompt)
	base := plain[len(prompt)-1]
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		m := loadT(t, p, LoadOptions{Threads: 2, SIMD: lvl.String(), KVCacheType: typ})
		if m.SIMD() != lvl.String() {
			t.Fatalf("asked %s on a CPU that has it: %s", lvl, m.SIMDChoice())
		}
		if m.KVType() != typ {
			t.Fatalf("asked for a %s KV cache: %s", typ, m.KVTypeChoice())
		}
		steps := logitsOf(t, m, prompt)
		s := m.NewSession(0)
		got, err := s.Prefill(prompt)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "prefill vs token by token", got, steps[len(prompt)-1])
		if lvl == simd.None || m.layers[0].wq.kern.packed() {
			same(t, lvl.String()+" vs none", got, base)
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
		t.Logf("%s KV cache: %s", typ, m.SIMDChoice())
	})
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for j := range want {
		if got[j] != want[j] {
			t.Fatalf("%s: logit %d = %v, want %v", what, j, got[j], want[j])
		}
	}
}
