package conformance

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/npuchat/npuchat/engine"
	"github.com/npuchat/npuchat/engine/sample"
	"github.com/npuchat/npuchat/engine/testmodel"
)

// f32Tol bounds the engine's logits against llama.cpp's on the same float
// weights, relative to the row's largest |logit|: both compute in float32
// with different summation orders, which moves logits by about 1e-6 of
// their scale on these shapes; 1e-4 leaves room without hiding a wrong
// formula (a wrong RoPE pairing, norm or scale moves them by 1e-1 or more).
const f32Tol = 1e-4

// shapes are the model shapes every comparison runs on, with seeds whose
// greedy paths are decided by clear margins (reported on failure).
var shapes = []struct {
	name  string
	shape testmodel.Shape
	seed  uint64
}{
	{"minicpm5", testmodel.MiniCPM5Small(), 1},
	{"qwen3", testmodel.Qwen3Small(), 1},
	{"minicpm-mup", testmodel.MiniCPMSmall(), 1},
}

// TestGGUFMatchesLlamaCpp: on F32 GGUFs the engine's logits match
// llama.cpp's within f32Tol at every position and its greedy tokens are
// the same over 32 steps. On F16 (ggml rounds activations to F16 for F16
// matrices), Q8_0, Q4_0 and Q4_1 GGUFs see checkQuantized.
func TestGGUFMatchesLlamaCpp(t *testing.T) {
	for _, sh := range shapes {
		w := model(t, sh.shape, sh.seed)
		p := prompt(w.Vocab)
		for _, typ := range []testmodel.TensorType{testmodel.F32, testmodel.F16, testmodel.Q8_0, testmodel.Q4_0, testmodel.Q4_1} {
			t.Run(fmt.Sprintf("%s/%s", sh.name, typ), func(t *testing.T) {
				path := writeGGUF(t, w, typ)
				if typ != testmodel.F32 {
					checkQuantized(t, path, engine.LoadOptions{}, w, typ, p)
					return
				}
				ref := llamaCpp(t, path, p)
				got := engineRun(t, path, engine.LoadOptions{}, p, ref.Greedy)
				d := compareLogits(t, "engine vs llama.cpp", got, ref, f32Tol)
				m := compareGreedy(t, "engine vs llama.cpp", got, ref)
				t.Logf("max relative logit difference %.3g, smallest reference margin %.3f", d, m)
			})
		}
	}
}

// qTol bounds the engine against llama.cpp on the same lossy file when
// the engine, like ggml, rounds activations (to 8 bits, or F16) before
// the dot products: the two then differ only in summation order.
const qTol = 1e-3

// checkQuantized compares the engine on a model file whose matrices are
// of lossy type typ (a GGUF, or a float folder the engine quantizes at
// load) with llama.cpp, both ways the engine can compute:
//
//   - with FloatActivations it multiplies float activations by exactly the
//     stored weights, and must match llama.cpp on an F32 GGUF of the
//     dequantized weights within f32Tol, with identical greedy tokens;
//   - by default it rounds activations to 8 bits as ggml does (Q8_0, or
//     Q8_1 for Q4_1) and must match llama.cpp on the quantized file
//     within qTol at every position up to the first where a value lands
//     within float32 rounding of a rounding tie (x·127/max ≈ k+½): there
//     the two sides' last-bit differences upstream round it apart, and
//     these random models (large gains, peaked attention) amplify that
//     one step to about the size of the whole activation-rounding effect.
//     So: the first position must match within qTol, and every row must
//     stay within 1.5× the distance between llama.cpp's own two runs
//     (a broken kernel is off by far more).
//
// ggml multiplies F16 matrices by activations rounded to F16; the engine
// does not, so F16 files take the first way only.
func checkQuantized(t *testing.T, path string, opts engine.LoadOptions, w *testmodel.Weights, typ testmodel.TensorType, p []int) {
	t.Helper()
	deq, err := w.Dequantized(typ)
	if err != nil {
		t.Fatal(err)
	}
	refF := llamaCpp(t, writeGGUF(t, deq, testmodel.F32), p)
	refQ := llamaCpp(t, writeGGUF(t, w, typ), p)
	ggmlNoise := 0.0
	for i := range refF.Logits {
		ggmlNoise = max(ggmlNoise, relDiff(refQ.Logits[i], refF.Logits[i]))
	}
	exact := opts
	exact.FloatActivations = true
	got := engineRun(t, path, exact, p, refF.Greedy)
	dF := compareLogits(t, "float activations vs llama.cpp on the dequantized weights", got, refF, f32Tol)
	m := compareGreedy(t, "float activations vs llama.cpp on the dequantized weights", got, refF)
	t.Logf("float activations: within %.3g of llama.cpp on the dequantized weights (smallest margin %.3f); "+
		"llama.cpp's own activation rounding moves its prompt logits by %.3g", dF, m, ggmlNoise)
	if typ == testmodel.F16 {
		return
	}

	gotQ := engineRun(t, path, opts, p, refQ.Greedy)
	rq, rr := gotQ.rows(), refQ.rows()
	agree, dQ := 0, 0.0
	for i := range rr {
		d := relDiff(rq[i], rr[i])
		dQ = max(dQ, d)
		if d <= qTol && agree == i {
			agree++
		}
	}
	t.Logf("8-bit activations: the first %d of %d rows within %.3g of llama.cpp on the %s file (max %.3g over all rows; "+
		"llama.cpp's two runs differ by %.3g)", agree, len(rr), qTol, typ, dQ, ggmlNoise)
	if agree == 0 {
		t.Errorf("8-bit activations: the first position differs from llama.cpp on the %s file by %.3g (tolerance %.1g)",
			typ, relDiff(rq[0], rr[0]), qTol)
	}
	if dQ > 1.5*ggmlNoise+qTol {
		t.Errorf("8-bit activations: logits differ from llama.cpp on the %s file by %.3g, more than llama.cpp's own "+
			"activation rounding moves them (%.3g)", typ, dQ, ggmlNoise)
	}
}

// maxRel is the largest relDiff over all rows of two runs.
func maxRel(a, b *run) float64 {
	d := 0.0
	ra, rb := a.rows(), b.rows()
	for i := range ra {
		d = max(d, relDiff(ra[i], rb[i]))
	}
	return d
}

// TestFormatsAgree: the same weights as a GGUF, a Hugging Face folder
// (F32, BF16 sharded) and a FastFlowLM q4nx folder compute the same model.
// Float folders are compared with llama.cpp on the F32 GGUF within
// f32Tol; the HF folder quantized at load (Q8_0, the engine's default) as
// checkQuantized compares a Q8_0 GGUF; the q4nx folder against
// llama.cpp on an F32 GGUF of exactly the weights the q4nx holds
// (testmodel.FLMEquivalent: bf16 scales and mins, quantized lm_head), so
// the q4nx reader is held to f32Tol too (with FloatActivations: llama.cpp
// has no bf16-scaled Q4_1 to round activations for).
func TestFormatsAgree(t *testing.T) {
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			w := model(t, sh.shape, sh.seed)
			p := prompt(w.Vocab)
			ref := llamaCpp(t, writeGGUF(t, w, testmodel.F32), p)

			for _, hf := range []struct {
				name string
				opts testmodel.HFOptions
			}{
				{"hf-f32", testmodel.HFOptions{DType: testmodel.F32}},
				{"hf-bf16-sharded", testmodel.HFOptions{DType: testmodel.BF16, Shards: 3}},
			} {
				dir := filepath.Join(t.TempDir(), hf.name)
				if err := testmodel.WriteHF(dir, w, hf.opts); err != nil {
					t.Fatal(err)
				}
				got := engineRun(t, dir, engine.LoadOptions{Quantize: "none"}, p, ref.Greedy)
				compareLogits(t, hf.name+" vs llama.cpp F32 GGUF", got, ref, f32Tol)
				compareGreedy(t, hf.name+" vs llama.cpp F32 GGUF", got, ref)
			}

			dir := filepath.Join(t.TempDir(), "hf-q8")
			if err := testmodel.WriteHF(dir, w, testmodel.HFOptions{}); err != nil {
				t.Fatal(err)
			}
			checkQuantized(t, dir, engine.LoadOptions{}, w, testmodel.Q8_0, p)

			if sh.shape.Arch == testmodel.ArchMiniCPM {
				return // FastFlowLM has no muP family
			}
			flms := []struct {
				name string
				opts testmodel.FLMOptions
				load engine.LoadOptions
			}{
				{"q4nx", testmodel.FLMOptions{}, engine.LoadOptions{FloatActivations: true}},
				{"q4nx-bf16", testmodel.FLMOptions{Unquantized: true}, engine.LoadOptions{}},
			}
			if sh.shape.Arch == testmodel.ArchLlama {
				flms = append(flms, struct {
					name string
					opts testmodel.FLMOptions
					load engine.LoadOptions
				}{"q4nx-llama-rows", testmodel.FLMOptions{LlamaRows: true}, engine.LoadOptions{RopeLayout: engine.RopeNormal, FloatActivations: true}})
			}
			for _, f := range flms {
				dir := filepath.Join(t.TempDir(), f.name)
				if err := testmodel.WriteFLM(dir, w, f.opts); err != nil {
					t.Fatal(err)
				}
				eq, err := w.FLMEquivalent(f.opts)
				if err != nil {
					t.Fatal(err)
				}
				refQ := llamaCpp(t, writeGGUF(t, eq, testmodel.F32), p)
				got := engineRun(t, dir, f.load, p, refQ.Greedy)
				d := compareLogits(t, f.name+" vs llama.cpp on its F32 equivalent", got, refQ, f32Tol)
				m := compareGreedy(t, f.name+" vs llama.cpp on its F32 equivalent", got, refQ)
				t.Logf("%s: max relative logit difference %.3g, smallest margin %.3f", f.name, d, m)
			}
		})
	}
}

// TestPortClaimReplicatedKVHeadsExact: the port's claim that repeating each
// of MiniCPM5's 2 KV heads 4 times (16:2 to 16:8) leaves the model
// unchanged is true, exactly. Loaded without folding, so the engine really
// computes with 8 KV heads, the q4nx with replicated heads gives
// bit-identical logits to the q4nx without; with folding (the default) it
// reports 2 KV heads and the same logits; and llama.cpp agrees that the
// two GGUFs compute the same.
func TestPortClaimReplicatedKVHeadsExact(t *testing.T) {
	w := model(t, testmodel.MiniCPM5Small(), 1)
	p := prompt(w.Vocab)
	orig, rep := filepath.Join(t.TempDir(), "orig"), filepath.Join(t.TempDir(), "rep")
	if err := testmodel.WriteFLM(orig, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteFLM(rep, w, testmodel.FLMOptions{ReplicateKV: 4}); err != nil {
		t.Fatal(err)
	}
	a := engineRun(t, orig, engine.LoadOptions{NoFoldKV: true}, p, nil)
	b := engineRun(t, rep, engine.LoadOptions{NoFoldKV: true}, p, nil)
	if d := maxAbsDiff(b, a); d != 0 {
		t.Errorf("8 replicated KV heads vs 2: logits differ by %g, want exactly 0", d)
	}
	compareGreedy(t, "replicated vs original KV heads", b, a)

	m, err := engine.Load(rep, engine.LoadOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	m.Close()
	if c.KVHeads != 2 || c.FileKVHeads != 8 {
		t.Errorf("folded config: %d KV heads computed, %d in the file; want 2 and 8", c.KVHeads, c.FileKVHeads)
	}
	folded := engineRun(t, rep, engine.LoadOptions{}, p, nil)
	if d := maxAbsDiff(folded, a); d != 0 {
		t.Errorf("folded replicated KV heads vs original: logits differ by %g, want exactly 0", d)
	}

	r, err := w.ReplicateKV(4)
	if err != nil {
		t.Fatal(err)
	}
	ra := llamaCpp(t, writeGGUF(t, w, testmodel.F32), p)
	rb := llamaCpp(t, writeGGUF(t, r, testmodel.F32), p)
	t.Logf("llama.cpp: replicated vs original KV heads differ by %g", maxAbsDiff(rb, ra))
	compareLogits(t, "llama.cpp replicated vs original KV heads", rb, ra, 1e-6)
	compareGreedy(t, "llama.cpp replicated vs original KV heads", rb, ra)
}

// TestPortClaimUnitQKNormChangesOutput: the port's claim that injecting
// q_norm/k_norm weights of 1 leaves the model unchanged is false: RMSNorm
// with unit gain still divides every q and k head by its root mean square.
// The engine on the port's q4nx (8 replicated KV heads, injected norms)
// computes what llama.cpp computes for a qwen3 GGUF with those norms, and
// that differs clearly from the original model; with SkipQKNorm the engine
// computes the original model again.
func TestPortClaimUnitQKNormChangesOutput(t *testing.T) {
	w := model(t, testmodel.MiniCPM5Small(), 1)
	p := prompt(w.Vocab)
	orig, port := filepath.Join(t.TempDir(), "orig"), filepath.Join(t.TempDir(), "port")
	if err := testmodel.WriteFLM(orig, w, testmodel.FLMOptions{}); err != nil {
		t.Fatal(err)
	}
	portOpts := testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}
	if err := testmodel.WriteFLM(port, w, portOpts); err != nil {
		t.Fatal(err)
	}
	a := engineRun(t, orig, engine.LoadOptions{FloatActivations: true}, p, nil)
	b := engineRun(t, port, engine.LoadOptions{FloatActivations: true}, p, nil)

	// llama.cpp agrees with the engine about the port's model.
	eq, err := w.FLMEquivalent(portOpts)
	if err != nil {
		t.Fatal(err)
	}
	ref := llamaCpp(t, writeGGUF(t, eq, testmodel.F32), p)
	compareLogits(t, "engine vs llama.cpp on the port's model", b, ref, f32Tol)

	d := 0.0
	for i := range a.Logits {
		d = max(d, relDiff(b.Logits[i], a.Logits[i]))
	}
	same := 0
	for i := range a.Greedy {
		if a.Greedy[i] == b.Greedy[i] {
			same++
		}
	}
	t.Logf("unit q/k norm: logits move by up to %.3g of their scale; %d of %d free-running greedy tokens unchanged", d, same, steps)
	if d < 0.05 {
		t.Errorf("injecting unit q/k norms moved logits by only %.3g relative; expected a clear change", d)
	}
	if sample.Argmax(a.Logits[len(p)-1]) == sample.Argmax(b.Logits[len(p)-1]) && same == steps {
		t.Errorf("injecting unit q/k norms changed no greedy token; the test model does not show the difference")
	}

	c := engineRun(t, port, engine.LoadOptions{SkipQKNorm: true, FloatActivations: true}, p, nil)
	if d := maxAbsDiff(c, a); d != 0 {
		t.Errorf("SkipQKNorm on the port's model vs the original: logits differ by %g, want exactly 0", d)
	}
}
