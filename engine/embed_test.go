package engine

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine/testmodel"
)

// refEmbed is the reference embedding: refHidden mean-pooled over the
// positions and L2-normalised, in float64.
func refEmbed(w *testmodel.Weights, tokens []int) []float64 {
	hs := refHidden(w, tokens)
	out := make([]float64, len(hs[0]))
	for _, h := range hs {
		for j, v := range h {
			out[j] += v / float64(len(hs))
		}
	}
	var ss float64
	for _, v := range out {
		ss += v * v
	}
	for j := range out {
		out[j] /= math.Sqrt(ss)
	}
	return out
}

// Embed is the float64 reference forward's last hidden state, mean-pooled
// and normalised; more tokens than one prefill batch are pooled across
// batches; a different text gives a different embedding.
func TestEmbedMatchesReference(t *testing.T) {
	w := randomWeights(t, 12, testmodel.MiniCPM5Small())
	dir := filepath.Join(t.TempDir(), "hf")
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{DType: testmodel.F32}); err != nil {
		t.Fatal(err)
	}
	m := loadT(t, dir, LoadOptions{Quantize: "none", FloatActivations: true})
	long := make([]int, 0, maxBatch+9)
	for i := range maxBatch + 9 {
		long = append(long, (i*37+5)%w.Shape.Vocab)
	}
	for _, tokens := range [][]int{testTokens, long, {7}} {
		got, err := m.Embed(context.Background(), tokens)
		if err != nil {
			t.Fatal(err)
		}
		want := refEmbed(w, tokens)
		var d, norm float64
		for j := range want {
			d = math.Max(d, math.Abs(float64(got[j])-want[j]))
			norm += float64(got[j]) * float64(got[j])
		}
		t.Logf("%d tokens: max |Δ| %.3g, |e| %.6f", len(tokens), d, math.Sqrt(norm))
		if d > 1e-5 || math.Abs(math.Sqrt(norm)-1) > 1e-5 {
			t.Errorf("%d tokens: embedding differs from the reference by %.3g (norm %.6f)", len(tokens), d, math.Sqrt(norm))
		}
	}
	a, _ := m.Embed(context.Background(), testTokens)
	b, _ := m.Embed(context.Background(), testTokens[:3])
	var dot float64
	for j := range a {
		dot += float64(a[j]) * float64(b[j])
	}
	if dot > 0.9999 {
		t.Errorf("two texts have the same embedding (cosine %.6f)", dot)
	}
	if _, err := m.Embed(context.Background(), nil); err == nil {
		t.Error("no tokens: no error")
	}
}
