package engine

import (
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestDecodeBytes: a decode step reads every product matrix once, as
// stored at level none (the Q8_0 sizes of the config's shapes) and as
// packed at the packed levels (the same bytes plus the padding rows of
// each matrix's last 16-row group).
func TestDecodeBytes(t *testing.T) {
	w := randomWeights(t, 27, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		m := loadT(t, p, LoadOptions{Threads: 2, SIMD: lvl.String()})
		if m.SIMD() != lvl.String() {
			t.Fatalf("asked %s on a CPU that has it: %s", lvl, m.SIMDChoice())
		}
		c := m.Config()
		q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
		shapes := [][2]int{{c.VocabSize, c.Hidden}} // rows, cols
		for range c.Layers {
			shapes = append(shapes, [2]int{q, c.Hidden}, [2]int{kv, c.Hidden}, [2]int{kv, c.Hidden}, [2]int{c.Hidden, q},
				[2]int{c.FFN, c.Hidden}, [2]int{c.FFN, c.Hidden}, [2]int{c.Hidden, c.FFN})
		}
		var want int64
		for _, s := range shapes {
			if !quant.HasPackedKernel(lvl, quant.Q8_0) {
				rb, _ := quant.Q8_0.RowBytes(s[1])
				want += int64(s[0] * rb)
			} else {
				want += int64(quant.PackedBytes(quant.Q8_0, s[0], s[1]))
			}
		}
		if got := m.DecodeBytes(); got != want {
			t.Errorf("%s: %d bytes per decoded token, want %d", lvl, got, want)
		}
		var macs int64
		for _, s := range shapes[1:] { // the output matrix is not a prompt token's
			macs += int64(s[0] * s[1])
		}
		if got := m.PrefillMACs(); got != macs {
			t.Errorf("%s: %d multiply-adds per prompt token, want %d", lvl, got, macs)
		}
	})
}
