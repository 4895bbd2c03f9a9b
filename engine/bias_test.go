package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/gguf"
	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// TestQwen2Biases loads a qwen2-architecture GGUF (a qwen3 model without
// q/k norm, plus q, k and v biases): zero biases give exactly the logits
// of the model without them, and non-zero biases change them.
func TestQwen2Biases(t *testing.T) {
	w := randomWeights(t, 13, testmodel.MiniCPM5Small())
	q3 := w.Clone()
	q3.Shape.Arch = testmodel.ArchQwen3 // the same function, stored unpermuted
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gguf")
	if err := testmodel.WriteGGUF(base, q3, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	withBias := func(name string, value float32) string {
		p := filepath.Join(dir, name+".gguf")
		rewriteGGUF(t, base, p, func(meta map[string]any, ts []gguf.WriteTensor) []gguf.WriteTensor {
			for k, v := range meta {
				if len(k) > 6 && k[:6] == "qwen3." {
					delete(meta, k)
					meta["qwen2."+k[6:]] = v
				}
			}
			meta["general.architecture"] = "qwen2"
			s := q3.Shape
			for l := 0; l < s.Layers; l++ {
				for _, b := range []struct {
					n string
					d int
				}{{"q", s.Heads * s.HeadDim}, {"k", s.KVHeads * s.HeadDim}, {"v", s.KVHeads * s.HeadDim}} {
					data := make([]byte, 4*b.d)
					for i := 0; i < b.d; i++ {
						binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(value*float32(i%5)))
					}
					ts = append(ts, gguf.WriteTensor{Name: fmt.Sprintf("blk.%d.attn_%s.bias", l, b.n), Dims: []uint64{uint64(b.d)}, Type: quant.F32, Data: data})
				}
			}
			return ts
		})
		return p
	}
	ref := logitsOf(t, loadT(t, base, LoadOptions{}), testTokens)
	zero := loadT(t, withBias("zero", 0), LoadOptions{})
	if c := zero.Config(); !c.AttnBias || c.Arch != "qwen2" || c.RopeLayout != RopeNeox {
		t.Fatalf("qwen2 config: %+v", c)
	}
	if got := logitsOf(t, zero, testTokens); fmt.Sprint(got) != fmt.Sprint(ref) {
		t.Error("zero biases changed the logits")
	}
	d, _ := maxDiff(logitsOf(t, loadT(t, withBias("some", 0.3), LoadOptions{}), testTokens), toF64(ref))
	if d < 1e-3 {
		t.Errorf("biases did not change the logits (max |Δ| %g)", d)
	}
}
