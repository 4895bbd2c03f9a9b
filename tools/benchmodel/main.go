// Command benchmodel writes random-weight models of MiniCPM5-2B's real
// shape (42 layers, hidden 2048, FFN 6144, 16/2 heads, head_dim 128,
// vocab 130560) for speed measurements (docs/performance.md): a Q4_0, a
// Q4_1 and a Q8_0 GGUF, which llama.cpp and the engine both read, and a
// FastFlowLM model.q4nx folder (KV heads replicated to 8 and unit q/k
// norms injected, as the NPU port does) for the engine alone. Speed does
// not depend on the weight values. The files take about 5.5 GB together:
// write them under /tmp, never into the repository.
//
//	go run ./tools/benchmodel -out /tmp/bench
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/npuchat/npuchat/engine/testmodel"
)

func main() {
	out := flag.String("out", "", "folder to write into (created)")
	layers := flag.Int("layers", 42, "transformer layers (fewer for a quick try)")
	formats := flag.String("formats", "q4_0,q4_1,q8_0,q4nx", "which files to write (comma-separated; the float weights take 10 GB, and all four in one run can need over 20 GB: write the GGUFs and the q4nx folder in two runs)")
	flag.Parse()
	// The float32 weights alone are 10 GB; collect garbage early so the
	// encoded copies do not double the peak.
	debug.SetGCPercent(25)
	if *out == "" {
		fmt.Fprintln(os.Stderr, "benchmodel: -out is required")
		os.Exit(2)
	}
	if err := run(*out, *layers, strings.Split(*formats, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "benchmodel:", err)
		os.Exit(1)
	}
}

func run(out string, layers int, formats []string) error {
	shape := testmodel.Shape{Arch: testmodel.ArchLlama, Hidden: 2048, Layers: layers, FFN: 6144,
		Heads: 16, KVHeads: 2, HeadDim: 128, Vocab: 130560, ContextLength: 4096,
		RopeTheta: 5e6, NormEps: 1e-6}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	start := time.Now()
	w, err := randomWeights(shape)
	if err != nil {
		return err
	}
	fmt.Printf("weights made in %s\n", time.Since(start).Round(time.Second))
	for _, t := range []testmodel.TensorType{testmodel.Q4_0, testmodel.Q4_1, testmodel.Q8_0} {
		if !slices.Contains(formats, strings.ToLower(t.String())) {
			continue
		}
		p := filepath.Join(out, fmt.Sprintf("minicpm5-2b-%s.gguf", t))
		if err := testmodel.WriteGGUF(p, w, t); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%s)\n", p, time.Since(start).Round(time.Second))
	}
	if !slices.Contains(formats, "q4nx") {
		return nil
	}
	dir := filepath.Join(out, "minicpm5-2b-q4nx")
	if err := testmodel.WriteFLM(dir, w, testmodel.FLMOptions{ReplicateKV: 4, InjectUnitQKNorm: true}); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s)\n", dir, time.Since(start).Round(time.Second))
	return nil
}

// randomWeights is testmodel.Random with the full vocabulary: testmodel's
// vocabulary builder learns merges from a small corpus and cannot make
// 130560 tokens, so the model is made with 512 and the vocabulary is then
// padded with plain filler tokens (unreachable by merges, which is fine
// for speed), with embedding and output rows of the same scales.
func randomWeights(shape testmodel.Shape) (*testmodel.Weights, error) {
	full := shape.Vocab
	shape.Vocab = 512
	w, err := testmodel.Random(1, shape)
	if err != nil {
		return nil, err
	}
	v := w.Vocab
	for i := len(v.Tokens); i < full; i++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("zzfill%06d", i))
		v.Types = append(v.Types, 1)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	grow := func(x []float32, std float64) []float32 {
		for len(x) < full*shape.Hidden {
			x = append(x, bf16(float32(rng.NormFloat64()*std)))
		}
		return x
	}
	w.Embed = grow(w.Embed, 1)
	w.Output = grow(w.Output, 6/math.Sqrt(float64(shape.Hidden)))
	w.Shape.Vocab = full
	return w, nil
}

// bf16 rounds f to the nearest bfloat16 (ties to even).
func bf16(f float32) float32 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}
