package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Arch names a model architecture as GGUF's general.architecture does.
type Arch string

// The architectures the writers know.
const (
	// ArchLlama is Llama (and MiniCPM5): untied or tied output, no q/k
	// norm; llama.cpp applies interleaved ("normal") RoPE to Q/K rows
	// permuted by convert_hf_to_gguf.py.
	ArchLlama Arch = "llama"
	// ArchQwen3 is Qwen3: per-head RMSNorm on q and k, NEOX RoPE on
	// un-permuted rows.
	ArchQwen3 Arch = "qwen3"
	// ArchMiniCPM is MiniCPM 1/2/4 with muP scales: embeddings times
	// ScaleEmb, each residual branch times ScaleDepth/sqrt(Layers), final
	// hidden state divided by Hidden/DimModelBase before the output.
	ArchMiniCPM Arch = "minicpm"
)

// Shape is the architecture and sizes of a model.
type Shape struct {
	Arch          Arch
	Hidden        int // embedding length
	Layers        int
	FFN           int // feed-forward (intermediate) size
	Heads         int // query heads
	KVHeads       int
	HeadDim       int
	Vocab         int // tokens, at least 259
	ContextLength int // context the model says it was trained for
	RopeTheta     float32
	NormEps       float32
	Tied          bool // output projection is the token embedding
	QKNorm        bool // per-head RMSNorm on q and k (qwen3 only)

	// muP scales, for ArchMiniCPM.
	ScaleEmb     float32
	ScaleDepth   float32
	DimModelBase int

	// LogitStd is the standard deviation of the logits the random output
	// projection aims at (about; default 6). A larger spread makes greedy
	// choices clearer.
	LogitStd float32
}

// MiniCPM5Small is MiniCPM5-2B scaled down: llama architecture, 16 query
// heads over 2 KV heads (GQA 8:1), heads*head_dim = hidden, untied output,
// no q/k norm, rope_theta 5e6, rms eps 1e-6.
func MiniCPM5Small() Shape {
	return Shape{Arch: ArchLlama, Hidden: 256, Layers: 2, FFN: 512, Heads: 16, KVHeads: 2,
		HeadDim: 16, Vocab: 512, ContextLength: 4096, RopeTheta: 5e6, NormEps: 1e-6}
}

// Qwen3Small is a Qwen3-like model: GQA 2:1, q/k norm, tied embeddings,
// heads*head_dim larger than hidden, rope_theta 1e6.
func Qwen3Small() Shape {
	return Shape{Arch: ArchQwen3, Hidden: 128, Layers: 2, FFN: 384, Heads: 4, KVHeads: 2,
		HeadDim: 64, Vocab: 416, ContextLength: 4096, RopeTheta: 1e6, NormEps: 1e-6,
		Tied: true, QKNorm: true}
}

// MiniCPMSmall is an older MiniCPM with muP scales (scale_emb 12,
// scale_depth 1.4, dim_model_base 64 so the logit divisor is 2), tied.
func MiniCPMSmall() Shape {
	return Shape{Arch: ArchMiniCPM, Hidden: 128, Layers: 3, FFN: 256, Heads: 4, KVHeads: 2,
		HeadDim: 32, Vocab: 300, ContextLength: 4096, RopeTheta: 10000, NormEps: 1e-5,
		Tied: true, ScaleEmb: 12, ScaleDepth: 1.4, DimModelBase: 64}
}

// Validate reports a shape the writers cannot make.
func (s Shape) Validate() error {
	switch {
	case s.Arch != ArchLlama && s.Arch != ArchQwen3 && s.Arch != ArchMiniCPM:
		return fmt.Errorf("shape: unknown architecture %q", s.Arch)
	case s.Hidden <= 0 || s.Layers <= 0 || s.FFN <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0:
		return fmt.Errorf("shape: sizes must be positive: %+v", s)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("shape: %d heads are not a multiple of %d KV heads", s.Heads, s.KVHeads)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("shape: head dim %d is odd", s.HeadDim)
	case s.Hidden%QK != 0 || s.FFN%QK != 0 || s.HeadDim*s.Heads%QK != 0:
		return fmt.Errorf("shape: hidden %d, ffn %d and heads*head_dim must be multiples of %d", s.Hidden, s.FFN, QK)
	case s.QKNorm && s.Arch != ArchQwen3:
		return fmt.Errorf("shape: q/k norm needs the qwen3 architecture, not %s", s.Arch)
	case s.Arch == ArchMiniCPM && (s.ScaleEmb == 0 || s.ScaleDepth == 0 || s.DimModelBase == 0):
		return fmt.Errorf("shape: minicpm needs ScaleEmb, ScaleDepth and DimModelBase")
	case s.Vocab < 259:
		return fmt.Errorf("shape: vocab %d is below 259 (256 bytes and 3 special tokens)", s.Vocab)
	}
	return nil
}

// Weights is one model's weights in Hugging Face layout: every matrix is
// row-major [out][in] (a torch Linear weight), Q/K rows are not permuted.
type Weights struct {
	Shape      Shape
	Vocab      *Vocab
	Embed      []float32 // [Vocab][Hidden]
	Output     []float32 // [Vocab][Hidden]; nil when Shape.Tied
	OutputNorm []float32 // [Hidden]
	Layers     []Layer
}

// Layer is one transformer block.
type Layer struct {
	AttnNorm     []float32 // [Hidden]
	Q            []float32 // [Heads*HeadDim][Hidden]
	K, V         []float32 // [KVHeads*HeadDim][Hidden]
	O            []float32 // [Hidden][Heads*HeadDim]
	QNorm, KNorm []float32 // [HeadDim]; nil without q/k norm
	FFNNorm      []float32 // [Hidden]
	Gate, Up     []float32 // [FFN][Hidden]
	Down         []float32 // [Hidden][FFN]
}

// Random makes weights of the given shape from seed. Every value is a
// bfloat16 number. Matrices are Gaussian with standard deviation
// 1/sqrt(fan_in) so activations stay near unit scale, the residual
// branches larger (see below); norm weights are uniform in [0.75, 1.25];
// the output projection (the embedding when tied) is scaled so the logits
// spread by about Shape.LogitStd.
func Random(seed uint64, s Shape) (*Weights, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.LogitStd == 0 {
		s.LogitStd = 6
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e7075636861742e))
	gauss := func(n int, std float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = roundBF16(float32(rng.NormFloat64() * std))
		}
		return x
	}
	norm := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = roundBF16(float32(0.75 + 0.5*rng.Float64()))
		}
		return x
	}
	h, qd, kd := s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	// The final RMSNorm makes the hidden state about unit scale per
	// component, so logits have std about |row| = std*sqrt(h).
	outStd := float64(s.LogitStd) * inv(h)
	if s.Arch == ArchMiniCPM {
		outStd *= float64(h) / float64(s.DimModelBase) // undo the logit divisor
	}
	// The residual branches (o_proj, down_proj outputs) are scaled to
	// outweigh the input embedding in the residual stream: with tied
	// embeddings the embedding's share x gives its own token a logit bonus
	// of |x|^2, every token predicts itself, and greedy decoding repeats
	// one token forever. 32 times the embedding's scale drowns that bonus.
	embStd, gain := 1.0, 4.0
	if s.Tied {
		embStd, gain = outStd, 32*outStd
	}
	resScale := 1.0
	if s.Arch == ArchMiniCPM {
		gain *= float64(s.ScaleEmb)
		resScale = float64(s.ScaleDepth) / math.Sqrt(float64(s.Layers))
	}
	gain /= resScale
	w := &Weights{Shape: s, Vocab: NewVocab(s.Vocab)}
	w.Embed = gauss(s.Vocab*h, embStd)
	for l := 0; l < s.Layers; l++ {
		L := Layer{
			AttnNorm: norm(h),
			Q:        gauss(qd*h, inv(h)),
			K:        gauss(kd*h, inv(h)),
			V:        gauss(kd*h, inv(h)),
			O:        gauss(h*qd, gain*inv(qd)),
			FFNNorm:  norm(h),
			Gate:     gauss(s.FFN*h, inv(h)),
			Up:       gauss(s.FFN*h, inv(h)),
			Down:     gauss(h*s.FFN, gain*inv(s.FFN)),
		}
		if s.QKNorm {
			L.QNorm, L.KNorm = norm(s.HeadDim), norm(s.HeadDim)
		}
		w.Layers = append(w.Layers, L)
	}
	w.OutputNorm = norm(h)
	if !s.Tied {
		w.Output = gauss(s.Vocab*h, outStd)
	}
	return w, nil
}

// Clone returns a deep copy.
func (w *Weights) Clone() *Weights {
	c := *w
	cp := func(x []float32) []float32 {
		if x == nil {
			return nil
		}
		return append([]float32(nil), x...)
	}
	c.Embed, c.Output, c.OutputNorm = cp(w.Embed), cp(w.Output), cp(w.OutputNorm)
	c.Layers = make([]Layer, len(w.Layers))
	for i, L := range w.Layers {
		c.Layers[i] = Layer{AttnNorm: cp(L.AttnNorm), Q: cp(L.Q), K: cp(L.K), V: cp(L.V), O: cp(L.O),
			QNorm: cp(L.QNorm), KNorm: cp(L.KNorm), FFNNorm: cp(L.FFNNorm),
			Gate: cp(L.Gate), Up: cp(L.Up), Down: cp(L.Down)}
	}
	return &c
}

// shallow copies w's structure but shares its value slices: for the
// derivations below, which replace slices and never write into them (a
// model-sized copy of every weight would take 10 GB at MiniCPM5-2B's
// shape).
func (w *Weights) shallow() *Weights {
	c := *w
	c.Layers = append([]Layer(nil), w.Layers...)
	return &c
}

// ReplicateKV returns weights with every KV head repeated factor times in
// place (torch repeat_interleave over heads of k_proj and v_proj rows), as
// the MiniCPM5 NPU port's expand_kv_heads.py does: KV head j becomes heads
// j*factor .. j*factor+factor-1. The result shares w's other slices.
func (w *Weights) ReplicateKV(factor int) (*Weights, error) {
	s := w.Shape
	if factor < 1 || s.Heads%(s.KVHeads*factor) != 0 {
		return nil, fmt.Errorf("replicate KV heads: %d KV heads times %d does not divide %d heads", s.KVHeads, factor, s.Heads)
	}
	c := w.shallow()
	c.Shape.KVHeads *= factor
	rowLen := s.HeadDim * s.Hidden
	rep := func(x []float32) []float32 {
		var out []float32
		for j := 0; j < s.KVHeads; j++ {
			for r := 0; r < factor; r++ {
				out = append(out, x[j*rowLen:(j+1)*rowLen]...)
			}
		}
		return out
	}
	for i := range c.Layers {
		c.Layers[i].K, c.Layers[i].V = rep(c.Layers[i].K), rep(c.Layers[i].V)
	}
	return c, nil
}

// WithUnitQKNorm returns the model the port's inject_qk_norm.py makes (sharing w's other slices): the
// same weights as a qwen3 model with q_norm and k_norm weights of 1. It
// does not compute the same function: RMSNorm with unit gain still divides
// q and k by their root mean square.
func (w *Weights) WithUnitQKNorm() (*Weights, error) {
	if w.Shape.Arch == ArchMiniCPM {
		return nil, fmt.Errorf("unit q/k norm: minicpm's muP scales have no qwen3 equivalent")
	}
	c := w.shallow()
	c.Shape.Arch, c.Shape.QKNorm = ArchQwen3, true
	for i := range c.Layers {
		c.Layers[i].QNorm = ones(w.Shape.HeadDim)
		c.Layers[i].KNorm = ones(w.Shape.HeadDim)
	}
	return c, nil
}

// Dequantized returns the weights a reader of a GGUF of type t sees: every
// matrix (embedding and output included) encoded as t and decoded again;
// norms are unchanged (GGUF keeps them F32).
func (w *Weights) Dequantized(t TensorType) (*Weights, error) {
	c := w.Clone()
	var err error
	c.eachMatrix(func(name string, m *[]float32, rowLen int) {
		if err != nil {
			return
		}
		var b []byte
		if b, err = Encode(t, *m, rowLen); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
			return
		}
		if *m, err = Decode(t, b, len(*m)); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
	})
	return c, err
}

// eachMatrix calls f for every matrix with its HF name and row length.
func (w *Weights) eachMatrix(f func(name string, m *[]float32, rowLen int)) {
	s := w.Shape
	f("model.embed_tokens.weight", &w.Embed, s.Hidden)
	if w.Output != nil {
		f("lm_head.weight", &w.Output, s.Hidden)
	}
	for i := range w.Layers {
		L := &w.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		f(p+"self_attn.q_proj.weight", &L.Q, s.Hidden)
		f(p+"self_attn.k_proj.weight", &L.K, s.Hidden)
		f(p+"self_attn.v_proj.weight", &L.V, s.Hidden)
		f(p+"self_attn.o_proj.weight", &L.O, s.Heads*s.HeadDim)
		f(p+"mlp.gate_proj.weight", &L.Gate, s.Hidden)
		f(p+"mlp.up_proj.weight", &L.Up, s.Hidden)
		f(p+"mlp.down_proj.weight", &L.Down, s.FFN)
	}
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}
