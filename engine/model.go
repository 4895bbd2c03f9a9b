package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/engine/simd"
)

// layer holds one transformer block's weights.
type layer struct {
	attnNorm       []float32
	wq, wk, wv     matrix
	bq, bk, bv     []float32 // nil without attention bias
	qNorm, kNorm   []float32 // nil without QK norm
	wo             matrix
	ffnNorm        []float32
	gate, up, down matrix
}

// Model is a loaded model: its config and weights. It is safe for
// concurrent use by several sessions. Close it after every session is done.
type Model struct {
	cfg     Config
	embed   matrix
	layers  []layer
	outNorm []float32
	output  matrix
	// ropeFactors divides each RoPE frequency (GGUF rope_freqs.weight), or nil.
	ropeFactors []float32
	threads     int
	arith       arith       // how matrix products compute (LoadOptions.FloatActivations)
	simd        simd.Choice // the level chosen at load (LoadOptions.SIMD, resolveSIMD)
	kvF16       bool        // sessions keep their KV cache as float16 (LoadOptions.KVF16)
	meta        map[string]any
	files       []*mmapfile.File
	// cachedKV is the source's KV heads when the matrices came from the
	// q4nx cache, already folded (0 otherwise).
	cachedKV int
	cacheErr error // why the q4nx cache could not be written, if it could not
	arena    arena // memory of the packed matrices (prepare)
}

// CacheError reports why a q4nx model's cache file (LoadOptions.CacheDir)
// could not be written at this load (nil when it was, or was not needed).
// The model works either way; the next load unpacks again.
func (m *Model) CacheError() error { return m.cacheErr }

// Config returns the model's configuration.
func (m *Model) Config() Config {
	c := m.cfg
	c.EOS = append([]int(nil), m.cfg.EOS...)
	return c
}

// GGUFMetadata returns the GGUF key/value metadata with exact Go types
// (nil when the model is not a GGUF file). Callers must not modify it.
func (m *Model) GGUFMetadata() map[string]any { return m.meta }

// Close releases the memory-mapped files.
func (m *Model) Close() error {
	var errs []error
	for _, f := range m.files {
		errs = append(errs, f.Close())
	}
	m.files = nil
	return errors.Join(errs...)
}

// Load opens a model: a GGUF file (or a folder holding exactly one), a
// Hugging Face folder (config.json and model.safetensors or a sharded
// index), or an FLM folder (config.json and model.q4nx; a path to
// model.q4nx itself also works).
func Load(path string, opts LoadOptions) (*Model, error) {
	m, err := load(path, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return m, nil
}

func load(path string, opts LoadOptions) (*Model, error) {
	switch opts.Quantize {
	case "", "q8_0", "none":
	default:
		return nil, fmt.Errorf("unknown quantization %q (want q8_0 or none)", opts.Quantize)
	}
	switch opts.RopeLayout {
	case "", RopeNeox, RopeNormal:
	default:
		return nil, fmt.Errorf("unknown RoPE layout %q (want neox or normal)", opts.RopeLayout)
	}
	var err error
	if opts.simd, err = opts.resolveSIMD(); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	if !st.IsDir() {
		switch {
		case filepath.Base(path) == "model.q4nx":
			dir = filepath.Dir(path)
		case filepath.Ext(path) == ".safetensors" || filepath.Ext(path) == ".json":
			dir = filepath.Dir(path)
		default:
			return loadGGUF(path, opts)
		}
	}
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	switch {
	case has("model.q4nx"):
		return loadQ4NX(dir, opts)
	case has("model.safetensors") || has("model.safetensors.index.json"):
		return loadHF(dir, opts)
	}
	if ggufs, _ := filepath.Glob(filepath.Join(dir, "*.gguf")); len(ggufs) == 1 {
		return loadGGUF(ggufs[0], opts)
	} else if len(ggufs) > 1 {
		return nil, fmt.Errorf("%d .gguf files here; name the one to load", len(ggufs))
	}
	return nil, errors.New("no model here: want a .gguf file, or a folder with config.json and model.safetensors (Hugging Face) or model.q4nx (FastFlowLM)")
}

// finish validates the assembled model, folds KV replicas and applies
// options common to every format.
func (m *Model) finish(opts LoadOptions) error {
	c := &m.cfg
	if opts.RopeLayout != "" {
		c.RopeLayout = opts.RopeLayout
	}
	if c.RopeScale == 0 {
		c.RopeScale = 1
	}
	for _, s := range []*float64{&c.EmbedScale, &c.ResidualScale, &c.LogitScale} {
		if *s == 0 {
			*s = 1
		}
	}
	c.UnitQKNorm = c.QKNorm
	for _, w := range m.layers {
		for _, v := range [][]float32{w.qNorm, w.kNorm} {
			for _, x := range v {
				if x != 1 {
					c.UnitQKNorm = false
				}
			}
		}
	}
	if opts.SkipQKNorm {
		for i := range m.layers {
			m.layers[i].qNorm, m.layers[i].kNorm = nil, nil
		}
		c.QKNorm = false
	}
	if m.cachedKV > 0 {
		c.FileKVHeads = m.cachedKV // folded when the cache was written
	} else {
		c.FileKVHeads = c.KVHeads
		if !opts.NoFoldKV {
			foldKV(m)
		}
	}
	m.threads = opts.threads()
	m.arith = arith{floatAct: opts.FloatActivations}
	m.kvF16 = opts.KVF16
	if err := c.validate(); err != nil {
		return err
	}
	return m.prepare(opts.simd, m.threads, m.release)
}

// release lets go of a packed matrix's original bytes: pages of a mapped
// file leave the resident set; heap copies (unpacked q4nx, quantized
// Hugging Face weights) are dropped.
func (m *Model) release(data []byte) {
	for _, f := range m.files {
		if f.Contains(data) {
			f.Release(data)
			return
		}
	}
}

// Threads is how many goroutines each session's matrix products use.
func (m *Model) Threads() int { return m.threads }

// SIMD names the level whose kernels the model runs: "avx512" (AVX-512
// VNNI on packed weights), "avxvnni" (AVX-VNNI on packed weights),
// "avx2" or "none" (plain Go). It is the level that ran, which may be
// lower than the one asked for (SIMDChoice says why).
func (m *Model) SIMD() string { return m.simd.Level.String() }

// SIMDChoice is the model's load record: how its level was chosen (what
// was asked for, what the CPU runs after any test ceiling, the level that
// runs) and whose packer repacked its weights at this load; its String
// says what was replaced and the packer ("asked avxvnni, CPU lacks
// AVX-VNNI: running avx2; weights packed by avx2").
func (m *Model) SIMDChoice() simd.Choice { return m.simd }
