package oflm

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// The proof that the conversion keeps the model: the engine loads the
// source pack as the original model (the port's unit q/k norms skipped,
// its llama.cpp-ordered Q/K rows rotated with interleaved RoPE) and the
// converted container as a plain llama model (NEOX RoPE, no q/k norms),
// and both give the same logits and greedy tokens, at every SIMD level.
//
// Tolerance: no weight is requantized (rows move whole inside the Q4NX
// chunks, checked bit for bit by TestGatherRowsMovesWholeRows), and each
// q and k value is computed from the same row bytes and input; RoPE
// rotates the same pairs by the same angles. What differs is where the
// rotated values sit inside a head, so attention's q·k sums the same
// products in another order: float32 rounding only, a few ulps of the
// logits. equivTol (relative to a row's largest |logit|) is far above
// that and far below what any wrong conversion moves (the mutations
// below move logits by 10 % or more of their scale).
const (
	equivTol = 1e-5
	steps    = 12 // greedy tokens decoded after the prompt
)

// shapes are MiniCPM5-shaped small models: MiniCPM5Small (16 heads of 16,
// 2 KV heads) and one with the real head_dim of 128, whose heads span
// four 32-row Q4NX blocks, so rows move between chunks.
func shapes() map[string]testmodel.Shape {
	hd128 := testmodel.MiniCPM5Small()
	hd128.Heads, hd128.HeadDim = 8, 128
	return map[string]testmodel.Shape{"minicpm5-small": testmodel.MiniCPM5Small(), "head_dim-128": hd128}
}

// port is how julianmb/MiniCPM5-2B-NPU2 was made: KV heads ×4, unit q/k
// norms injected, llama.cpp's Q/K rows kept by the qwen3 converter.
var port = testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true, LlamaRows: true}

// writeSource writes w as an FLM pack with opts into a fresh folder.
func writeSource(t *testing.T, w *testmodel.Weights, opts testmodel.FLMOptions) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	if err := testmodel.WriteFLM(dir, w, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sourceLoad is how the engine computes the original model from a pack
// written with opts.
func sourceLoad(opts testmodel.FLMOptions) engine.LoadOptions {
	o := engine.LoadOptions{SkipQKNorm: opts.InjectUnitQKNorm}
	if opts.LlamaRows {
		o.RopeLayout = engine.RopeNormal
	}
	return o
}

// run is what a model computed for the prompt and the greedy steps.
type run struct {
	logits [][]float32 // one row per prompt token and per greedy step
	greedy []int
}

// engineRun loads path at level and runs the prompt token by token, then
// greedy decoding.
func engineRun(t *testing.T, path string, opts engine.LoadOptions, l simd.Level, prompt []int) run {
	t.Helper()
	opts.SIMD, opts.Threads = l.String(), 2
	m, err := engine.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.SIMDChoice().Level; got != l {
		t.Fatalf("loaded at %s, asked for %s", got, l)
	}
	s := m.NewSession(len(prompt) + steps + 1)
	var r run
	var last []float32
	for _, tok := range prompt {
		if last, err = s.Forward(tok); err != nil {
			t.Fatal(err)
		}
		r.logits = append(r.logits, append([]float32(nil), last...))
	}
	for i := 0; i < steps; i++ {
		tok := argmax(last)
		r.greedy = append(r.greedy, tok)
		if last, err = s.Forward(tok); err != nil {
			t.Fatal(err)
		}
		r.logits = append(r.logits, append([]float32(nil), last...))
	}
	return r
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// compare returns the largest difference between two runs' logit rows,
// relative to the row's largest |logit|, and whether the greedy tokens
// agree.
func compare(a, b run) (float64, bool) {
	worst := 0.0
	for i := range a.logits {
		scale, d := 0.0, 0.0
		for j := range a.logits[i] {
			scale = max(scale, math.Abs(float64(a.logits[i][j])))
			d = max(d, math.Abs(float64(a.logits[i][j]-b.logits[i][j])))
		}
		worst = max(worst, d/scale)
	}
	same := len(a.greedy) == len(b.greedy)
	for i := range a.greedy {
		same = same && a.greedy[i] == b.greedy[i]
	}
	return worst, same
}

func testPrompt(v *testmodel.Vocab) []int {
	n := v.Size()
	return []int{v.BOS, 104, 101, 108, 108, 111, n / 2, n - 5, 32, 263}
}

// tensorNames lists a container's tensors.
func tensorNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	h, err := readHeader(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range h.Tensors {
		names = append(names, x.Name)
	}
	return names
}

func TestConvertKeepsTheModel(t *testing.T) {
	cases := []struct {
		name string
		src  testmodel.FLMOptions
		opts Options
	}{
		// julianmb/MiniCPM5-2B-NPU2 as published: 8 KV heads already.
		{"port", port, Options{}},
		{"port, KV heads asked for", port, Options{KVHeads: 8}},
		// A pack that kept the original 2 KV heads: expanded here.
		{"2 KV heads, llama.cpp rows", testmodel.FLMOptions{LlamaRows: true}, Options{KVHeads: 8}},
		// A port made from a qwen3 GGUF: rows already in HF order.
		{"port, HF rows", testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}, Options{SourceRows: RowsHF}},
	}
	for sname, sh := range shapes() {
		w, err := testmodel.Random(7, sh)
		if err != nil {
			t.Fatal(err)
		}
		prompt := testPrompt(w.Vocab)
		for _, c := range cases {
			t.Run(sname+"/"+c.name, func(t *testing.T) {
				src := writeSource(t, w, c.src)
				dst := filepath.Join(t.TempDir(), "oflm")
				if _, err := Convert(context.Background(), src, dst, c.opts); err != nil {
					t.Fatal(err)
				}
				var cfg struct {
					ModelType string   `json:"model_type"`
					Arch      []string `json:"architectures"`
					KV        int      `json:"num_key_value_heads"`
				}
				b, err := os.ReadFile(filepath.Join(dst, "config.json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &cfg); err != nil {
					t.Fatal(err)
				}
				if cfg.ModelType != "llama" || len(cfg.Arch) != 1 || cfg.Arch[0] != "LlamaForCausalLM" || cfg.KV != 8 {
					t.Errorf("config.json: model_type %q, architectures %v, %d KV heads; want llama, LlamaForCausalLM, 8", cfg.ModelType, cfg.Arch, cfg.KV)
				}
				for _, n := range tensorNames(t, filepath.Join(dst, weightsFile)) {
					if strings.Contains(n, "q_norm") || strings.Contains(n, "k_norm") {
						t.Errorf("the container keeps %s", n)
					}
				}
				m, err := engine.Load(dst, engine.LoadOptions{NoFoldKV: true})
				if err != nil {
					t.Fatal(err)
				}
				if c := m.Config(); c.Arch != "llama" || c.KVHeads != 8 || c.QKNorm {
					t.Errorf("engine reads the container as %s with %d KV heads, q/k norm %v; want llama, 8, false", c.Arch, c.KVHeads, c.QKNorm)
				}
				m.Close()
				simdtest.Each(t, func(t *testing.T, l simd.Level) {
					want := engineRun(t, src, sourceLoad(c.src), l, prompt)
					got := engineRun(t, dst, engine.LoadOptions{}, l, prompt)
					d, same := compare(got, want)
					t.Logf("max |Δlogit| %.3g of the row's scale; greedy %v", d, got.greedy)
					if d > equivTol || !same {
						t.Errorf("converted container differs from the source pack: max |Δlogit| %.3g of scale (tolerance %g), greedy %v vs %v", d, equivTol, got.greedy, want.greedy)
					}
				})
			})
		}
	}
}

// TestBrokenConversionsDiffer runs the same comparison on conversions made
// wrong on purpose and requires each to fail it clearly: so the
// equivalence above is a test that can fail.
func TestBrokenConversionsDiffer(t *testing.T) {
	w, err := testmodel.Random(8, testmodel.MiniCPM5Small())
	if err != nil {
		t.Fatal(err)
	}
	prompt := testPrompt(w.Vocab)
	twoKV := testmodel.FLMOptions{LlamaRows: true}
	cases := []struct {
		name string
		src  testmodel.FLMOptions
		opts Options
	}{
		{"Q/K rows left in llama.cpp's order", port, Options{SourceRows: RowsHF}},
		{"Q/K rows un-permuted twice", testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}, Options{}},
		{"unit q/k norms kept", port, Options{mut: mutation{keepQKNorm: true}}},
		{"KV heads repeated as a whole", twoKV, Options{KVHeads: 8, mut: mutation{tileKV: true}}},
	}
	l := simdtest.CPU(t).Best(simd.Top)
	t.Run("config.json's KV head count wrong", func(t *testing.T) {
		src := writeSource(t, w, port)
		dst := filepath.Join(t.TempDir(), "oflm")
		if _, err := Convert(context.Background(), src, dst, Options{mut: mutation{configKV: 2}}); err != nil {
			t.Fatal(err)
		}
		if m, err := engine.Load(dst, engine.LoadOptions{}); err == nil {
			m.Close()
			t.Fatal("the engine loaded a container whose config.json says 2 KV heads and whose k_proj holds 8")
		} else {
			t.Logf("load refused: %v", err)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := writeSource(t, w, c.src)
			dst := filepath.Join(t.TempDir(), "oflm")
			if _, err := Convert(context.Background(), src, dst, c.opts); err != nil {
				t.Fatal(err)
			}
			want := engineRun(t, src, sourceLoad(c.src), l, prompt)
			got := engineRun(t, dst, engine.LoadOptions{}, l, prompt)
			d, same := compare(got, want)
			t.Logf("max |Δlogit| %.3g of the row's scale; greedy agrees %v", d, same)
			if d < 100*equivTol {
				t.Errorf("a broken conversion matched the source within %.3g: the comparison cannot tell", d)
			}
		})
	}
}
