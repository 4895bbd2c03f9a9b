package engine

import (
	"errors"
	"fmt"

	"github.com/npuchat/npuchat/engine/simd"
)

// RopeLayout says which pairs of a head's values RoPE rotates together.
type RopeLayout string

const (
	// RopeNeox rotates (x[i], x[i+d/2]): Hugging Face's rotate_half, and
	// llama.cpp's NEOX type (qwen2, qwen3).
	RopeNeox RopeLayout = "neox"
	// RopeNormal rotates (x[2i], x[2i+1]): llama.cpp's "normal" type, used
	// by the llama and minicpm GGUF architectures, whose Q and K rows
	// convert_hf_to_gguf permuted so that this equals Hugging Face's result.
	RopeNormal RopeLayout = "normal"
)

// Config is a model's shape and constants, read from the file.
type Config struct {
	Arch   string // "llama", "qwen2", "qwen3", "minicpm"
	Format string // "gguf", "safetensors", "q4nx"

	VocabSize int
	Hidden    int
	Layers    int
	Heads     int // query heads
	KVHeads   int // key/value heads the engine computes (after folding)
	// FileKVHeads is the number of KV heads stored in the file; it is
	// larger than KVHeads when bit-identical replicas were folded.
	FileKVHeads int
	HeadDim     int
	FFN         int

	RopeTheta float64
	// RopeDim is how many of a head's values RoPE rotates (normally HeadDim).
	RopeDim    int
	RopeLayout RopeLayout
	// RopeScale multiplies positions (linear RoPE scaling; 1 when absent).
	RopeScale float64
	NormEps   float64
	// ContextLength is the model's trained context (0 when unknown).
	ContextLength int

	Tied   bool // output projection is the token embedding
	QKNorm bool // per-head RMSNorm on q and k before RoPE (Qwen3)
	// UnitQKNorm reports that the file's q/k norm weights are all exactly
	// 1, the sign of norms a port injected into a model that has none.
	// (RMSNorm with unit weights is not the identity; see SkipQKNorm.)
	UnitQKNorm bool
	AttnBias   bool // q, k, v projections have biases (Qwen2)

	// MiniCPM muP scales, 1 when the model has none: embeddings are
	// multiplied by EmbedScale, each residual branch by ResidualScale
	// (scale_depth/√layers), and the final hidden state divided by
	// LogitScale (hidden/dim_model_base) before the output projection.
	EmbedScale    float64
	ResidualScale float64
	LogitScale    float64

	BOS int   // -1 when unknown
	EOS []int // every end-of-sequence id the file names
}

// LoadOptions tunes Load.
type LoadOptions struct {
	// Threads splits each matrix product across this many goroutines
	// (0: one per physical core, SMT siblings not counted).
	Threads int
	// Quantize is what Hugging Face float weights become at load:
	// "q8_0" (default) or "none" (computed in their stored type).
	// GGUF and Q4NX weights are always used as stored.
	Quantize string
	// SkipQKNorm ignores q_norm/k_norm weights: set it where a port
	// injected unit norms into a model that has none (MiniCPM5-2B-NPU2).
	SkipQKNorm bool
	// NoFoldKV keeps KV heads that are bit-identical replicas instead of
	// folding them back into the original heads.
	NoFoldKV bool
	// RopeLayout overrides the RoPE pairing chosen from the file ("" keeps
	// it). Q4NX files converted from a llama-architecture GGUF with the
	// qwen3 converter keep llama.cpp's permuted Q/K rows and need
	// RopeNormal.
	RopeLayout RopeLayout
	// FloatActivations multiplies Q8_0, Q4_0 and Q4_1 weights (and
	// Q4_1BF16, what model.q4nx unpacks to) by the float32 activations,
	// exactly as stored. By default activations are rounded to 8 bits per
	// value in blocks of 32 first, exactly as llama.cpp does
	// (quant.Q8Vector), which allows integer SIMD dot products several
	// times faster; logits then move by about 1% of their scale, as
	// llama.cpp's do.
	FloatActivations bool
	// SIMD caps the kernels: "" or "auto" (the best the CPU has; the
	// environment variable NPUCHAT_SIMD can set it instead), "avx512"
	// (AVX-512 VNNI on weights repacked at load), "avxvnni" (AVX-VNNI on
	// the same packed weights), "avx2" (AVX2 on the same packed weights)
	// or "none" (plain Go, the rows as stored). A level the CPU lacks is replaced by
	// the best one below it, and Model.SIMDChoice says so. The level is
	// resolved once at load (engine/simd.Resolve), the kernels chosen
	// once per matrix from it.
	SIMD string
	// CPUCeiling, for tests, makes the CPU look as if it had no level
	// above this one (a level name; "" reads $NPUCHAT_CPU_CEILING, and
	// when that is empty too, CPUID alone counts): a machine with
	// AVX-512 then loads models as an AVX-VNNI, an AVX2 or a plain-Go
	// machine would.
	CPUCeiling string
	// Getenv is where $NPUCHAT_SIMD and $NPUCHAT_CPU_CEILING are read
	// when SIMD or CPUCeiling is empty (nil: os.Getenv), once, at load.
	Getenv func(string) string
	// KVCacheType is the type of every session's KV cache: KVTypeF32
	// ("" too: the default, whose answers match llama.cpp's exactly),
	// KVTypeF16 (half the memory; keys and values rounded once when
	// stored) or KVTypeQ8 (llama.cpp's q8_0 blocks: 34 bytes per 32
	// values, about half of float16's; rounded to 8 bits when stored).
	// Another name is an error at load.
	KVCacheType string
	// KVF16 is KVCacheType "f16" (when KVCacheType is empty).
	KVF16 bool
	// CacheDir is a folder of NPU Chat's own (config's data folder, never
	// one of FastFlowLM's) where a model.q4nx is unpacked once: later
	// loads map that file and are ready at once. Empty: unpack in memory
	// at every load.
	CacheDir string
	// Progress, when not nil, is called as a model.q4nx is unpacked with
	// the bytes read so far and the file's size.
	Progress func(done, total int64)

	// simd is SIMD and CPUCeiling resolved against the CPU, once, by
	// Load (resolveSIMD); the loaders read it.
	simd simd.Choice
}

func (o LoadOptions) threads() int {
	if o.Threads > 0 {
		return o.Threads
	}
	return physicalCores()
}

// ErrContextFull is returned by Forward when the session's KV cache holds
// as many positions as its limit.
var ErrContextFull = errors.New("context is full")

// validate checks the numbers a forward pass relies on.
func (c *Config) validate() error {
	switch {
	case c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.FFN <= 0 || c.VocabSize <= 0:
		return fmt.Errorf("config has a non-positive size: hidden %d, layers %d, heads %d, kv heads %d, head dim %d, ffn %d, vocab %d",
			c.Hidden, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.VocabSize)
	case c.Hidden > 1<<16 || c.Layers > 1024 || c.Heads > 1024 || c.HeadDim > 1024 || c.FFN > 1<<20 || c.VocabSize > 1<<22:
		return fmt.Errorf("config sizes are absurd: hidden %d, layers %d, heads %d, head dim %d, ffn %d, vocab %d",
			c.Hidden, c.Layers, c.Heads, c.HeadDim, c.FFN, c.VocabSize)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("%d query heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
	case c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0:
		return fmt.Errorf("RoPE dimension %d does not fit head dimension %d", c.RopeDim, c.HeadDim)
	case !(c.NormEps > 0 && c.NormEps < 1):
		return fmt.Errorf("RMSNorm epsilon %g is not in (0, 1)", c.NormEps)
	case !(c.RopeTheta > 0):
		return fmt.Errorf("RoPE theta %g is not positive", c.RopeTheta)
	case c.RopeLayout != RopeNeox && c.RopeLayout != RopeNormal:
		return fmt.Errorf("unknown RoPE layout %q", c.RopeLayout)
	}
	return nil
}

// IsEOS reports whether token ends a sequence (any of the model's EOS ids).
func (c Config) IsEOS(token int) bool { return contains(c.EOS, token) }
