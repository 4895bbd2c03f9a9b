package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/engine/simd/simdtest"
	"github.com/npuchat/npuchat/engine/testmodel"
)

var testTokens = []int{3, 290, 17, 256, 42, 5, 99, 1}

func randomWeights(t *testing.T, seed uint64, s testmodel.Shape) *testmodel.Weights {
	t.Helper()
	w, err := testmodel.Random(seed, s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// logitsOf runs tokens through a fresh session and returns a copy of each
// position's logits.
func logitsOf(t *testing.T, m *Model, tokens []int) [][]float32 {
	t.Helper()
	s := m.NewSession(0)
	var out [][]float32
	for _, tok := range tokens {
		l, err := s.Forward(tok)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

func maxDiff(got [][]float32, want [][]float64) (float64, int) {
	var worst float64
	argmaxAgree := 0
	for p := range want {
		bestG, bestW := 0, 0
		for i := range want[p] {
			worst = math.Max(worst, math.Abs(float64(got[p][i])-want[p][i]))
			if got[p][i] > got[p][bestG] {
				bestG = i
			}
			if want[p][i] > want[p][bestW] {
				bestW = i
			}
		}
		if bestG == bestW {
			argmaxAgree++
		}
	}
	return worst, argmaxAgree
}

func loadT(t *testing.T, path string, opts LoadOptions) *Model {
	t.Helper()
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestForwardMatchesReference loads the same random models from every
// format and compares the logits with the float64 reference computed on
// exactly the weights the file holds.
func TestForwardMatchesReference(t *testing.T) {
	llama := randomWeights(t, 1, testmodel.MiniCPM5Small())
	qwen3 := randomWeights(t, 2, testmodel.Qwen3Small())
	minicpm := randomWeights(t, 3, testmodel.MiniCPMSmall())
	type writer func(dir string) (path string, err error)
	gguf := func(w *testmodel.Weights, typ testmodel.TensorType) writer {
		return func(dir string) (string, error) {
			p := filepath.Join(dir, "m.gguf")
			return p, testmodel.WriteGGUF(p, w, typ)
		}
	}
	hf := func(w *testmodel.Weights, o testmodel.HFOptions) writer {
		return func(dir string) (string, error) { return dir, testmodel.WriteHF(dir, w, o) }
	}
	flm := func(w *testmodel.Weights, o testmodel.FLMOptions) writer {
		return func(dir string) (string, error) { return dir, testmodel.WriteFLM(dir, w, o) }
	}
	deq := func(w *testmodel.Weights, typ testmodel.TensorType) *testmodel.Weights {
		d, err := w.Dequantized(typ)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	flmEq := func(w *testmodel.Weights, o testmodel.FLMOptions) *testmodel.Weights {
		d, err := w.FLMEquivalent(o)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	port := testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}
	cases := []struct {
		name    string
		write   writer
		opts    LoadOptions
		ref     *testmodel.Weights
		kvHeads int
		format  string
	}{
		{"llama gguf F32", gguf(llama, testmodel.F32), LoadOptions{}, llama, 2, "gguf"},
		{"llama gguf F16", gguf(llama, testmodel.F16), LoadOptions{}, deq(llama, testmodel.F16), 2, "gguf"},
		{"llama gguf BF16", gguf(llama, testmodel.BF16), LoadOptions{Threads: 3}, llama, 2, "gguf"},
		{"llama gguf Q8_0", gguf(llama, testmodel.Q8_0), LoadOptions{}, deq(llama, testmodel.Q8_0), 2, "gguf"},
		{"llama gguf Q4_0", gguf(llama, testmodel.Q4_0), LoadOptions{}, deq(llama, testmodel.Q4_0), 2, "gguf"},
		{"llama gguf Q4_1", gguf(llama, testmodel.Q4_1), LoadOptions{}, deq(llama, testmodel.Q4_1), 2, "gguf"},
		{"qwen3 gguf F32", gguf(qwen3, testmodel.F32), LoadOptions{}, qwen3, 2, "gguf"},
		{"minicpm gguf F32", gguf(minicpm, testmodel.F32), LoadOptions{}, minicpm, 2, "gguf"},
		{"llama hf F32 kept", hf(llama, testmodel.HFOptions{DType: testmodel.F32}), LoadOptions{Quantize: "none"}, llama, 2, "safetensors"},
		{"llama hf BF16 q8_0 sharded", hf(llama, testmodel.HFOptions{Shards: 3}), LoadOptions{}, deq(llama, testmodel.Q8_0), 2, "safetensors"},
		{"qwen3 hf BF16 kept", hf(qwen3, testmodel.HFOptions{}), LoadOptions{Quantize: "none"}, qwen3, 2, "safetensors"},
		{"minicpm hf F32 kept", hf(minicpm, testmodel.HFOptions{DType: testmodel.F32}), LoadOptions{Quantize: "none"}, minicpm, 2, "safetensors"},
		{"llama flm", flm(llama, testmodel.FLMOptions{}), LoadOptions{}, flmEq(llama, testmodel.FLMOptions{}), 2, "q4nx"},
		{"llama flm llama rows", flm(llama, testmodel.FLMOptions{LlamaRows: true}), LoadOptions{RopeLayout: RopeNormal},
			flmEq(llama, testmodel.FLMOptions{LlamaRows: true}), 2, "q4nx"},
		{"qwen3 flm", flm(qwen3, testmodel.FLMOptions{}), LoadOptions{}, flmEq(qwen3, testmodel.FLMOptions{}), 2, "q4nx"},
		// The NPU port: KV heads replicated 2 → 8 and unit q/k norms
		// injected. Folded and with the norms skipped it is the original.
		{"port flm original", flm(llama, port), LoadOptions{SkipQKNorm: true},
			flmEq(llama, testmodel.FLMOptions{ReplicateKV: 4}), 2, "q4nx"},
		{"port flm as stored", flm(llama, port), LoadOptions{NoFoldKV: true}, flmEq(llama, port), 8, "q4nx"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, err := c.write(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			// The float64 reference multiplies exact activations: so does
			// the engine with FloatActivations. The default (activations
			// rounded to 8 bits, as llama.cpp does) is checked below with a
			// tolerance for that rounding, and against llama.cpp itself in
			// engine/conformance.
			exact := c.opts
			exact.FloatActivations = true
			m := loadT(t, path, exact)
			cfg := m.Config()
			if cfg.KVHeads != c.kvHeads || cfg.Format != c.format {
				t.Errorf("config: %d KV heads, format %s; want %d, %s", cfg.KVHeads, cfg.Format, c.kvHeads, c.format)
			}
			if cfg.QKNorm && cfg.UnitQKNorm && c.ref.Shape.Arch == testmodel.ArchQwen3 && c.ref.Layers[0].QNorm[0] != 1 {
				t.Error("trained q/k norms reported as unit norms")
			}
			want := refForward(c.ref, testTokens)
			got := logitsOf(t, m, testTokens)
			d, agree := maxDiff(got, want)
			t.Logf("max |Δlogit| %.3g, argmax agrees %d/%d", d, agree, len(want))
			if d > 2e-4 || agree != len(want) {
				t.Errorf("logits differ from the reference: max |Δ| %.3g, argmax agrees %d/%d", d, agree, len(want))
			}
			// 8-bit activations move logits by a few percent of their
			// spread (about 6 here), never by a wrong formula's amount.
			d, agree = maxDiff(logitsOf(t, loadT(t, path, c.opts), testTokens), want)
			t.Logf("8-bit activations: max |Δlogit| %.3g, argmax agrees %d/%d", d, agree, len(want))
			if d > 0.6 || agree < len(want)-1 {
				t.Errorf("8-bit activations: logits differ from the reference: max |Δ| %.3g, argmax agrees %d/%d", d, agree, len(want))
			}
		})
	}
}

// TestFoldIsExact checks the port's claim that replicated KV heads change
// nothing: the 8-head file, folded or not, gives bit-identical logits to
// the 2-head file, and folding restores 2 KV heads.
func TestFoldIsExact(t *testing.T) {
	w := randomWeights(t, 4, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	orig, rep := filepath.Join(dir, "orig"), filepath.Join(dir, "rep")
	if err := testmodel.WriteFLM(orig, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteFLM(rep, w, testmodel.FLMOptions{ReplicateKV: 4}); err != nil {
		t.Fatal(err)
	}
	base := logitsOf(t, loadT(t, orig, LoadOptions{}), testTokens)
	folded := loadT(t, rep, LoadOptions{})
	if c := folded.Config(); c.KVHeads != 2 || c.FileKVHeads != 8 {
		t.Errorf("folded config: %d KV heads of %d in the file, want 2 of 8", c.KVHeads, c.FileKVHeads)
	}
	for name, m := range map[string]*Model{"folded": folded, "unfolded": loadT(t, rep, LoadOptions{NoFoldKV: true})} {
		got := logitsOf(t, m, testTokens)
		for p := range base {
			for i := range base[p] {
				if got[p][i] != base[p][i] {
					t.Fatalf("%s: position %d logit %d = %v, 2-head model %v", name, p, i, got[p][i], base[p][i])
				}
			}
		}
	}
}

// TestUnitQKNormIsNotIdentity checks the other claim: computing the
// injected unit q/k norms changes the logits.
func TestUnitQKNormIsNotIdentity(t *testing.T) {
	w := randomWeights(t, 5, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{InjectUnitQKNorm: true}); err != nil {
		t.Fatal(err)
	}
	mw, mo := loadT(t, dir, LoadOptions{}), loadT(t, dir, LoadOptions{SkipQKNorm: true})
	if c := mw.Config(); !c.QKNorm || !c.UnitQKNorm {
		t.Errorf("injected norms: QKNorm %v, UnitQKNorm %v", c.QKNorm, c.UnitQKNorm)
	}
	if c := mo.Config(); c.QKNorm || !c.UnitQKNorm {
		t.Errorf("skipped norms: QKNorm %v, UnitQKNorm %v", c.QKNorm, c.UnitQKNorm)
	}
	with := logitsOf(t, mw, testTokens)
	without := logitsOf(t, mo, testTokens)
	d, _ := maxDiff(with, toF64(without))
	if d < 1e-2 {
		t.Errorf("unit q/k norm changed the logits by only %g", d)
	}
}

func toF64(x [][]float32) [][]float64 {
	out := make([][]float64, len(x))
	for i := range x {
		out[i] = make([]float64, len(x[i]))
		for j, v := range x[i] {
			out[i][j] = float64(v)
		}
	}
	return out
}

func TestSession(t *testing.T) {
	w := randomWeights(t, 6, testmodel.Qwen3Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	m := loadT(t, p, LoadOptions{Threads: 2})
	seq := logitsOf(t, m, testTokens)

	s := m.NewSession(len(testTokens))
	last, err := s.Prefill(testTokens[:5])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(last) != fmt.Sprint(seq[4]) || s.Pos() != 5 {
		t.Errorf("Prefill differs from Forward one by one (pos %d)", s.Pos())
	}
	// Rewind to 3 and continue differently, then back to the original.
	if err := s.Rewind(3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(7); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewind(3); err != nil {
		t.Fatal(err)
	}
	l, err := s.Prefill(testTokens[3:8])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(l) != fmt.Sprint(seq[7]) {
		t.Error("logits after Rewind differ from a fresh run")
	}
	// The session is full now.
	if _, err := s.Forward(1); !errors.Is(err, ErrContextFull) {
		t.Errorf("Forward past the limit: %v, want ErrContextFull", err)
	}
	if _, err := m.NewSession(4).Prefill(testTokens); !errors.Is(err, ErrContextFull) {
		t.Errorf("Prefill past the limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.NewSession(0).PrefillContext(ctx, testTokens); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled prefill: %v", err)
	}
	if err := s.Rewind(9); err == nil {
		t.Error("Rewind beyond the position accepted")
	}
	if _, err := m.NewSession(0).Forward(100000); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
	s2 := m.NewSession(0)
	if _, err := s2.Prefill([]int{1, 2, -1}); err == nil || s2.Pos() != 0 {
		t.Errorf("prefill with a bad token: %v, position %d", err, s2.Pos())
	}
	if got := m.NewSession(1 << 30).MaxContext(); got != 4096 {
		t.Errorf("session limit %d, want the model's 4096", got)
	}
}

// TestMatvec compares the threaded, batched matrix products with the
// reference for every type: on float activations (the exact path) within
// float32 rounding; on 8-bit activations (the default for Q8_0, Q4_0,
// Q4_1, Q4_1BF16) against the reference applied to the rounded
// activations, with the SIMD kernels and with them forced off.
func TestMatvec(t *testing.T) {
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) { testMatvec(t, lvl) })
}

func testMatvec(t *testing.T, lvl simd.Level) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q4_1BF16, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		rows, cols := 100, 512
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, rows*rb)
		for i := 0; i < rows; i++ {
			fillRow(r, typ, data[i*rb:(i+1)*rb])
		}
		m, err := newMatrix(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		const batch = 3
		xs, want, wantQ8 := make([][]float32, batch), make([][]float32, batch), make([][]float32, batch)
		for b := range xs {
			xs[b] = make([]float32, cols)
			for j := range xs[b] {
				xs[b][j] = float32(r.NormFloat64())
			}
			want[b] = make([]float32, rows)
			matvecRef(want[b], &m, xs[b])
			// the same product on the activations rounded as llama.cpp
			// rounds them (quant tests DotQ8Ref against its definition)
			if quant.HasQ8Kernel(typ) {
				var q quant.Q8Vector
				q.QuantizePlain(xs[b]) // every level rounds to these bits
				wantQ8[b] = make([]float32, rows)
				for i := range wantQ8[b] {
					wantQ8[b][i] = quant.DotQ8Ref(typ, m.Row(i), &q)
				}
			}
		}
		// mag bounds float32 rounding: Σ|w·x| per row (for the 8-bit
		// activations, |x| is within 1% of the rounded values)
		mag := make([][]float64, batch)
		row := make([]float32, cols)
		for b := range mag {
			mag[b] = make([]float64, rows)
			for i := range mag[b] {
				m.rowFloats(i, row)
				for j, w := range row {
					mag[b][i] += math.Abs(float64(w) * float64(xs[b][j]))
				}
			}
		}
		for _, threads := range []int{1, 2, 3, 7} {
			for _, floatAct := range []bool{true, false} {
				c := struct {
					floatAct bool
					lvl      simd.Level
				}{floatAct, lvl}
				mc := m
				mc.choose(c.floatAct, c.lvl)
				if mc.kern.packed() {
					if err := mc.pack(threads, new(arena)); err != nil {
						t.Fatal(err)
					}
				}
				ref := want
				if !c.floatAct && quant.HasQ8Kernel(typ) {
					ref = wantQ8
				}
				for _, n := range []int{1, batch} {
					got := make([][]float32, n)
					for b := range got {
						got[b] = make([]float32, rows)
					}
					var k mulTask
					owner := new(int)
					k.mul(newPool(owner, threads), xs[:n], product{got, &mc})
					for b := range got {
						for i := range got[b] {
							d := math.Abs(float64(got[b][i] - ref[b][i]))
							// the packed and plain-Go 8-bit kernels compute in
							// DotQ8Ref's order: bit for bit
							exact := !c.floatAct && quant.HasQ8Kernel(typ) && (c.lvl != simd.AVX2 || mc.kern.packed())
							if exact && got[b][i] != ref[b][i] || d > 1e-5*mag[b][i]+1e-6 {
								t.Fatalf("%s %+v (kernel %d) threads %d batch %d: vector %d row %d: %v, reference %v", typ, c, mc.kern, threads, n, b, i, got[b][i], ref[b][i])
							}
						}
					}
				}
			}
		}
	}
}

// fillRow writes random bytes with finite scales.
func fillRow(r *rand.Rand, typ quant.Type, b []byte) {
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	f16 := func(off int) {
		v := quant.F32ToF16(float32(r.Float64() * 0.05))
		if typ == quant.Q4_1BF16 {
			v = quant.F32ToBF16(float32(r.Float64() * 0.05))
		}
		b[off], b[off+1] = byte(v), byte(v>>8)
	}
	switch typ {
	case quant.F32:
		for i := 0; i+4 <= len(b); i += 4 {
			v := math.Float32bits(float32(r.NormFloat64()))
			b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
	case quant.F16, quant.BF16:
		for i := 0; i < len(b); i += 2 {
			f16(i)
		}
	case quant.Q8_0, quant.Q4_0:
		for i := 0; i < len(b); i += typ.BlockBytes() {
			f16(i)
		}
	case quant.Q4_1, quant.Q4_1BF16:
		for i := 0; i < len(b); i += 20 {
			f16(i)
			f16(i + 2)
		}
	case quant.Q5_0:
		for i := 0; i < len(b); i += 22 {
			f16(i)
		}
	case quant.Q5_1:
		for i := 0; i < len(b); i += 24 {
			f16(i)
			f16(i + 2)
		}
	case quant.Q5_K:
		for i := 0; i < len(b); i += 176 {
			f16(i)
			f16(i + 2)
		}
	case quant.Q4_K:
		for i := 0; i < len(b); i += 144 {
			f16(i)
			f16(i + 2)
		}
	case quant.Q6_K:
		for i := 0; i < len(b); i += 210 {
			f16(i + 208)
		}
	}
}

// TestRopeLayouts checks that interleaved RoPE on llama.cpp's permuted
// rows equals NEOX RoPE on Hugging Face rows.
func TestRopeLayouts(t *testing.T) {
	hd := 16
	c := Config{HeadDim: hd, RopeDim: hd, RopeTheta: 10000, RopeScale: 1}
	hfVec := make([]float32, 2*hd)
	for i := range hfVec {
		hfVec[i] = float32(i%7) - 3 + float32(i)/10
	}
	// convert_hf_to_gguf permute: row h*hd + 2i + j comes from h*hd + j*hd/2 + i
	perm := make([]float32, len(hfVec))
	for h := 0; h < 2; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				perm[h*hd+2*i+j] = hfVec[h*hd+j*hd/2+i]
			}
		}
	}
	neox := &Model{cfg: c}
	neox.cfg.RopeLayout = RopeNeox
	normal := &Model{cfg: c}
	normal.cfg.RopeLayout = RopeNormal
	cos, sin := make([]float32, hd/2), make([]float32, hd/2)
	neox.ropeAngles(cos, sin, 5)
	neox.rope(hfVec, 2, cos, sin)
	normal.rope(perm, 2, cos, sin)
	for h := 0; h < 2; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				if a, b := perm[h*hd+2*i+j], hfVec[h*hd+j*hd/2+i]; math.Abs(float64(a-b)) > 1e-6 {
					t.Fatalf("head %d pair %d.%d: normal %v, neox %v", h, i, j, a, b)
				}
			}
		}
	}
	// Position 0 is the identity.
	v := []float32{1, 2, 3, 4}
	m := &Model{cfg: Config{HeadDim: 4, RopeDim: 4, RopeTheta: 10000, RopeScale: 1, RopeLayout: RopeNormal}}
	c0, s0 := make([]float32, 2), make([]float32, 2)
	m.ropeAngles(c0, s0, 0)
	m.rope(v, 1, c0, s0)
	if fmt.Sprint(v) != "[1 2 3 4]" {
		t.Errorf("rope at 0 changed %v", v)
	}
}

// TestWrongRopeLayoutDiffers shows the reference comparison can fail: a
// q4nx with llama.cpp's permuted Q/K rows read with NEOX RoPE is a
// different model.
func TestWrongRopeLayoutDiffers(t *testing.T) {
	w := randomWeights(t, 10, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	o := testmodel.FLMOptions{LlamaRows: true}
	if err := testmodel.WriteFLM(dir, w, o); err != nil {
		t.Fatal(err)
	}
	ref, err := w.FLMEquivalent(o)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := maxDiff(logitsOf(t, loadT(t, dir, LoadOptions{}), testTokens), refForward(ref, testTokens))
	if d < 1e-2 {
		t.Errorf("NEOX RoPE on permuted rows matched the reference (max |Δ| %g)", d)
	}
}

func TestEOSFromConfigs(t *testing.T) {
	w := randomWeights(t, 12, testmodel.MiniCPM5Small())
	dir := t.TempDir()
	if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id":[1,130073],"bos_token_id":0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadT(t, dir, LoadOptions{}).Config()
	if !c.IsEOS(1) || !c.IsEOS(130073) || c.IsEOS(5) {
		t.Errorf("EOS %v", c.EOS)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	m := loadT(t, p, LoadOptions{})
	meta := m.GGUFMetadata()
	if meta["general.architecture"] != "llama" {
		t.Errorf("GGUF metadata architecture %v", meta["general.architecture"])
	}
	if _, ok := meta["tokenizer.ggml.tokens"].([]string); !ok {
		t.Errorf("tokenizer.ggml.tokens is %T", meta["tokenizer.ggml.tokens"])
	}
	if id, ok := meta["tokenizer.ggml.eos_token_id"].(uint32); !ok || !m.Config().IsEOS(int(id)) {
		t.Errorf("GGUF EOS %v not in %v", meta["tokenizer.ggml.eos_token_id"], m.Config().EOS)
	}
	if loadT(t, dir, LoadOptions{}).GGUFMetadata() != nil {
		t.Error("HF model has GGUF metadata")
	}
}

// TestThreadsAgree runs a 300-token prompt (long enough for the threaded
// attention) with 1 and 3 threads: splitting rows and heads across
// goroutines does not change any arithmetic, so the logits are identical.
func TestThreadsAgree(t *testing.T) {
	w := randomWeights(t, 14, testmodel.MiniCPM5Small())
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.WriteGGUF(p, w, testmodel.Q8_0); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 300)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % 512
	}
	var got [][]float32
	for _, threads := range []int{1, 3} {
		s := loadT(t, p, LoadOptions{Threads: threads}).NewSession(0)
		l, err := s.Prefill(prompt)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, append([]float32(nil), l...))
	}
	for i := range got[0] {
		if got[0][i] != got[1][i] {
			t.Fatalf("logit %d: %v with 1 thread, %v with 3", i, got[0][i], got[1][i])
		}
	}
}

func TestLoadPaths(t *testing.T) {
	w := randomWeights(t, 15, testmodel.Qwen3Small())
	flmDir, ggufDir, hfDir := t.TempDir(), t.TempDir(), t.TempDir()
	if err := testmodel.WriteFLM(flmDir, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteGGUF(filepath.Join(ggufDir, "a.gguf"), w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteHF(hfDir, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	for path, format := range map[string]string{
		filepath.Join(flmDir, "model.q4nx"): "q4nx",
		flmDir:                              "q4nx",
		ggufDir:                             "gguf",
		filepath.Join(hfDir, "model.safetensors"): "safetensors",
		filepath.Join(hfDir, "config.json"):       "safetensors",
	} {
		if got := loadT(t, path, LoadOptions{}).Config().Format; got != format {
			t.Errorf("%s: format %s, want %s", path, got, format)
		}
	}
	if err := testmodel.WriteGGUF(filepath.Join(ggufDir, "b.gguf"), w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ggufDir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "2 .gguf files") {
		t.Errorf("two GGUFs: %v", err)
	}
}

// TestFilesReleased checks that models held entirely in memory do not keep
// their files open, and that models computed from the mapping do.
func TestFilesReleased(t *testing.T) {
	w := randomWeights(t, 16, testmodel.MiniCPM5Small())
	hf, flm := t.TempDir(), t.TempDir()
	if err := testmodel.WriteHF(hf, w, testmodel.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteFLM(flm, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		opts LoadOptions
		open bool
	}{
		{hf, LoadOptions{}, false}, {hf, LoadOptions{Quantize: "none"}, true}, {flm, LoadOptions{}, false},
	} {
		m := loadT(t, c.path, c.opts)
		if got := len(m.files) > 0; got != c.open {
			t.Errorf("%s %+v: files open %v, want %v", filepath.Base(c.path), c.opts, got, c.open)
		}
		logitsOf(t, m, testTokens[:2]) // still runs
	}
}

// TestGQAEqualsExplicitRepetition: 16 query heads over 2 KV heads (8:1)
// give bit-identical logits to the same model with every KV head written
// out 8 times (16 KV heads, plain multi-head attention), loaded unfolded.
func TestGQAEqualsExplicitRepetition(t *testing.T) {
	w := randomWeights(t, 17, testmodel.MiniCPM5Small())
	mha, err := w.ReplicateKV(8)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gqaPath, mhaPath := filepath.Join(dir, "gqa.gguf"), filepath.Join(dir, "mha.gguf")
	if err := testmodel.WriteGGUF(gqaPath, w, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteGGUF(mhaPath, mha, testmodel.F32); err != nil {
		t.Fatal(err)
	}
	m := loadT(t, mhaPath, LoadOptions{NoFoldKV: true})
	if c := m.Config(); c.KVHeads != 16 {
		t.Fatalf("%d KV heads", c.KVHeads)
	}
	want := logitsOf(t, loadT(t, gqaPath, LoadOptions{}), testTokens)
	got := logitsOf(t, m, testTokens)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Error("GQA 8:1 differs from explicit repetition")
	}
	if c := loadT(t, mhaPath, LoadOptions{}).Config(); c.KVHeads != 2 || c.FileKVHeads != 16 {
		t.Errorf("folding 16 KV heads gave %d of %d", c.KVHeads, c.FileKVHeads)
	}
}

// TestMatmulProducts: one task of several matrices (q, k and v) gives
// each matrix exactly its own product, for row counts that split chunks
// across the matrices' boundaries, with every kernel and thread count.
func TestMatmulProducts(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const cols = 256
	simdtest.Each(t, func(t *testing.T, lvl simd.Level) {
		var mats []matrix
		for _, rows := range []int{100, 37, 260} {
			rb, _ := quant.Q4_0.RowBytes(cols)
			data := make([]byte, rows*rb)
			for i := 0; i < rows; i++ {
				fillRow(r, quant.Q4_0, data[i*rb:(i+1)*rb])
			}
			m, err := newMatrix(quant.Q4_0, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			m.choose(false, lvl)
			if m.kern.packed() {
				if err := m.pack(2, new(arena)); err != nil {
					t.Fatal(err)
				}
			}
			mats = append(mats, m)
		}
		for _, n := range []int{1, 5} {
			xs := make([][]float32, n)
			for i := range xs {
				xs[i] = make([]float32, cols)
				for j := range xs[i] {
					xs[i][j] = float32(r.NormFloat64())
				}
			}
			outs := func() [][][]float32 {
				o := make([][][]float32, len(mats))
				for i, m := range mats {
					o[i] = make([][]float32, n)
					for b := range o[i] {
						o[i][b] = make([]float32, m.Rows)
					}
				}
				return o
			}
			want := outs()
			for i := range mats {
				var k mulTask
				k.mul(newPool(new(int), 1), xs, product{want[i], &mats[i]})
			}
			for _, threads := range []int{1, 2, 3, 7} {
				got := outs()
				var k mulTask
				k.mul(newPool(new(int), threads), xs, product{got[0], &mats[0]}, product{got[1], &mats[1]}, product{got[2], &mats[2]})
				for i := range got {
					for b := range got[i] {
						for row := range got[i][b] {
							if got[i][b][row] != want[i][b][row] {
								t.Fatalf("%s, %d vectors, %d threads: matrix %d vector %d row %d = %v, alone %v", lvl, n, threads, i, b, row, got[i][b][row], want[i][b][row])
							}
						}
					}
				}
			}
		}
	})
}
