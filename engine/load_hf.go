package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/npuchat/npuchat/engine/mmapfile"
	"github.com/npuchat/npuchat/engine/q4nx"
	"github.com/npuchat/npuchat/engine/quant"
	"github.com/npuchat/npuchat/engine/safetensors"
	"github.com/npuchat/npuchat/engine/simd"
	"github.com/npuchat/npuchat/safefile"
)

// hfConfig is the part of a Hugging Face config.json the engine reads.
type hfConfig struct {
	ModelType     string          `json:"model_type"`
	Hidden        int             `json:"hidden_size"`
	FFN           int             `json:"intermediate_size"`
	Layers        int             `json:"num_hidden_layers"`
	Heads         int             `json:"num_attention_heads"`
	KVHeads       *int            `json:"num_key_value_heads"`
	HeadDim       *int            `json:"head_dim"`
	Vocab         int             `json:"vocab_size"`
	RopeTheta     *float64        `json:"rope_theta"`
	NormEps       *float64        `json:"rms_norm_eps"`
	MaxPositions  int             `json:"max_position_embeddings"`
	Tie           *bool           `json:"tie_word_embeddings"`
	BOS           json.RawMessage `json:"bos_token_id"`
	EOS           json.RawMessage `json:"eos_token_id"`
	ScaleEmb      *float64        `json:"scale_emb"`
	ScaleDepth    *float64        `json:"scale_depth"`
	DimModelBase  *float64        `json:"dim_model_base"`
	RopeScaling   json.RawMessage `json:"rope_scaling"`
	PartialRotary *float64        `json:"partial_rotary_factor"`
}

// hfArchs are the model_type values the engine computes.
var hfArchs = map[string]bool{"llama": true, "mistral": true, "qwen2": true, "qwen3": true, "minicpm": true}

// SupportedArch reports whether the engine computes models of an
// architecture (a config.json model_type, a FastFlowLM details.family).
func SupportedArch(arch string) bool { return hfArchs[strings.ToLower(arch)] }

// Caps on a Hugging Face folder's JSON files (read through safefile, so
// that a FIFO, device or giant file in a folder a person chose is refused
// instead of blocking or filling memory): config.json and
// generation_config.json are a few KiB; model.safetensors.index.json
// lists every tensor once (under 1 MiB for the largest models).
const (
	maxHFConfigBytes = 16 << 20
	maxHFIndexBytes  = 64 << 20
)

// readHFConfig turns config.json into a Config (with Hugging Face's NEOX
// RoPE pairing, which matches the unpermuted rows of safetensors files).
func readHFConfig(dir, format string) (Config, bool, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := safefile.ReadFile(path, maxHFConfigBytes)
	if err != nil {
		return Config{}, false, err
	}
	var h hfConfig
	if err := json.Unmarshal(raw, &h); err != nil {
		return Config{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if !hfArchs[h.ModelType] {
		return Config{}, false, fmt.Errorf("%s: model_type %q is not supported (supported: llama, mistral, qwen2, qwen3, minicpm)", path, h.ModelType)
	}
	c := Config{
		Arch: h.ModelType, Format: format, Hidden: h.Hidden, FFN: h.FFN, Layers: h.Layers,
		Heads: h.Heads, KVHeads: h.Heads, VocabSize: h.Vocab, RopeTheta: 10000, NormEps: 1e-6,
		ContextLength: h.MaxPositions, RopeLayout: RopeNeox, BOS: -1,
	}
	if h.KVHeads != nil {
		c.KVHeads = *h.KVHeads
	}
	if h.Heads > 0 {
		c.HeadDim = h.Hidden / h.Heads
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	}
	c.RopeDim = c.HeadDim
	if h.PartialRotary != nil {
		c.RopeDim = int(float64(c.HeadDim) * *h.PartialRotary)
	}
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	if h.NormEps != nil {
		c.NormEps = *h.NormEps
	}
	if len(h.RopeScaling) > 0 && string(h.RopeScaling) != "null" {
		var rs struct {
			Type     string  `json:"type"`
			RopeType string  `json:"rope_type"`
			Factor   float64 `json:"factor"`
		}
		if err := json.Unmarshal(h.RopeScaling, &rs); err != nil {
			return Config{}, false, fmt.Errorf("%s: rope_scaling: %w", path, err)
		}
		kind := rs.RopeType
		if kind == "" {
			kind = rs.Type
		}
		switch {
		case kind == "default":
		case kind == "linear" && rs.Factor > 0:
			c.RopeScale = 1 / rs.Factor
		default:
			return Config{}, false, fmt.Errorf("%s: rope_scaling %s is not supported (only linear)", path, h.RopeScaling)
		}
	}
	if h.ScaleEmb != nil {
		c.EmbedScale = *h.ScaleEmb
	}
	if h.ScaleDepth != nil && h.Layers > 0 {
		c.ResidualScale = *h.ScaleDepth / math.Sqrt(float64(h.Layers))
	}
	if h.DimModelBase != nil && *h.DimModelBase > 0 {
		c.LogitScale = float64(h.Hidden) / *h.DimModelBase
	}
	if ids, err := tokenIDs(h.BOS); err != nil {
		return Config{}, false, fmt.Errorf("%s: bos_token_id: %w", path, err)
	} else if len(ids) > 0 {
		c.BOS = ids[0]
	}
	if c.EOS, err = tokenIDs(h.EOS); err != nil {
		return Config{}, false, fmt.Errorf("%s: eos_token_id: %w", path, err)
	}
	// generation_config.json often lists more end ids (MiniCPM5: [1, 130073]).
	if raw, err := safefile.ReadFile(filepath.Join(dir, "generation_config.json"), maxHFConfigBytes); err == nil {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if json.Unmarshal(raw, &g) == nil {
			if ids, err := tokenIDs(g.EOS); err == nil {
				for _, id := range ids {
					if !contains(c.EOS, id) {
						c.EOS = append(c.EOS, id)
					}
				}
			}
		}
	}
	tie := h.Tie != nil && *h.Tie
	if err := c.validate(); err != nil {
		return Config{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return c, tie, nil
}

// tokenIDs reads a token id that config.json gives as a number, a list
// or null.
func tokenIDs(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("%s is neither an id nor a list of ids", raw)
	}
	return many, nil
}

// stSource serves tensors from one or more safetensors files.
type stSource struct {
	tensors  map[string]safetensors.Tensor
	file     map[string]string // tensor name → file, for errors
	quantize bool
	threads  int
	tie      bool // ignore lm_head (tie_word_embeddings)
	// views is set when a matrix still points into a file.
	views bool
}

func (s *stSource) has(name string) bool {
	if s.tie && name == hfNames.output {
		return false
	}
	_, ok := s.tensors[name]
	return ok
}

func stType(dtype string) (quant.Type, bool) {
	switch dtype {
	case "F32":
		return quant.F32, true
	case "F16":
		return quant.F16, true
	case "BF16":
		return quant.BF16, true
	}
	return 0, false
}

func (s *stSource) get(name string, shape ...int) (safetensors.Tensor, quant.Type, error) {
	t, ok := s.tensors[name]
	if !ok {
		return t, 0, missing(name)
	}
	if len(t.Shape) != len(shape) || fmt.Sprint(t.Shape) != fmt.Sprint(shape) {
		return t, 0, fmt.Errorf("%s: tensor %s: shape %s, the config needs %s", s.file[name], name, shapeString(t.Shape), shapeString(shape))
	}
	typ, ok := stType(t.DType)
	if !ok {
		return t, 0, fmt.Errorf("%s: tensor %s: dtype %s is not supported (want BF16, F16 or F32)", s.file[name], name, t.DType)
	}
	return t, typ, nil
}

func (s *stSource) matrix(name string, rows, cols int) (matrix, error) {
	t, typ, err := s.get(name, rows, cols)
	if err != nil {
		return matrix{}, err
	}
	m, err := newMatrix(typ, rows, cols, t.Data)
	if err != nil {
		return matrix{}, fmt.Errorf("tensor %s: %w", name, err)
	}
	if s.quantize {
		m = quantizeQ8(m, s.threads)
	}
	if m.Type == typ {
		s.views = true
	}
	return m, nil
}

func (s *stSource) vector(name string, n int) ([]float32, error) {
	t, typ, err := s.get(name, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	quant.Dequantize(typ, t.Data, out)
	return out, nil
}

// openSafetensors maps and parses the given files of dir into one source.
func openSafetensors(dir string, names []string, m *Model) (*stSource, error) {
	src := &stSource{tensors: map[string]safetensors.Tensor{}, file: map[string]string{}}
	for _, name := range names {
		if filepath.Base(name) != name {
			return nil, fmt.Errorf("shard name %q is not a plain file name", name)
		}
		mf, err := mmapfile.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m.files = append(m.files, mf)
		f, err := safetensors.Parse(mf.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for tn, t := range f.Tensors {
			if prev, dup := src.file[tn]; dup {
				return nil, fmt.Errorf("tensor %s is in both %s and %s", tn, prev, name)
			}
			src.tensors[tn] = t
			src.file[tn] = name
		}
	}
	return src, nil
}

func loadHF(dir string, opts LoadOptions) (_ *Model, err error) {
	c, tie, err := readHFConfig(dir, "safetensors")
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	shards := []string{"model.safetensors"}
	if raw, err := safefile.ReadFile(filepath.Join(dir, "model.safetensors.index.json"), maxHFIndexBytes); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("model.safetensors.index.json: %w", err)
		}
		set := map[string]bool{}
		for _, f := range idx.WeightMap {
			set[f] = true
		}
		shards = shards[:0]
		for f := range set {
			shards = append(shards, f)
		}
		sort.Strings(shards)
		if len(shards) == 0 {
			return nil, errors.New("model.safetensors.index.json lists no weights")
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	src, err := openSafetensors(dir, shards, m)
	if err != nil {
		return nil, err
	}
	src.quantize = opts.Quantize != "none"
	src.threads = opts.threads()
	src.tie = tie
	if err := m.build(src, hfNames); err != nil {
		return nil, err
	}
	if err := m.finish(opts); err != nil {
		return nil, err
	}
	if !src.views {
		// Everything was quantized into memory: release the files.
		if err := m.Close(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// q4nxSource serves model.q4nx tensors, unpacking packed matrices (and,
// for the AVX-512 kernels, packing them again as quant.Packed right away,
// through one reused buffer, so that no second copy of the weights
// builds up). The file's pages are released as matrices are read.
type q4nxSource struct {
	st       *stSource
	threads  int
	pack     bool       // repack the matrices at load for level's packed kernels
	level    simd.Level // the model's level (LoadOptions.resolveSIMD): its packer packs
	file     *mmapfile.File
	scratch  []byte
	arena    *arena // the model's, for packed matrices
	progress func(done, total int64)
	done     int64
}

func (s *q4nxSource) has(name string) bool { return s.st.has(name) }

func (s *q4nxSource) matrix(name string, rows, cols int) (matrix, error) {
	m, err := s.unpack(name, rows, cols)
	if err != nil && !strings.HasPrefix(err.Error(), "model.q4nx") {
		err = fmt.Errorf("model.q4nx: %w", err)
	}
	return m, err
}

// read notes that b's bytes of the file were used.
func (s *q4nxSource) read(b []byte) {
	s.file.Release(b)
	s.done += int64(len(b))
	if s.progress != nil {
		s.progress(s.done, int64(len(s.file.Data)))
	}
}

func (s *q4nxSource) unpack(name string, rows, cols int) (matrix, error) {
	t, ok := s.st.tensors[name]
	if !ok {
		return matrix{}, missing(name)
	}
	if !q4nx.IsPacked(t) {
		// A float matrix (the BF16 embedding): copy it out of the file so
		// that the mapping can be released after loading.
		mat, err := s.st.matrix(name, rows, cols)
		mat.Data = bytes.Clone(mat.Data)
		s.read(t.Data)
		return mat, err
	}
	if rows%q4nx.RowBlock != 0 || cols%q4nx.Group != 0 {
		return matrix{}, fmt.Errorf("tensor %s: a %d×%d matrix cannot be Q4NX-packed", name, rows, cols)
	}
	if len(t.Data) != q4nx.PackedBytes(rows, cols) {
		return matrix{}, fmt.Errorf("tensor %s: %d packed bytes (shape %s), a %d×%d matrix needs %d: shape mismatch with config.json",
			name, len(t.Data), shapeString(t.Shape), rows, cols, q4nx.PackedBytes(rows, cols))
	}
	pack := s.pack && quant.CanPack(quant.Q4_1BF16, cols)
	var dst []byte
	if pack {
		dst = s.scratch
	}
	data, _, err := q4nx.UnpackInto(dst, t.Data, rows, cols, s.threads)
	if err != nil {
		return matrix{}, fmt.Errorf("tensor %s: %w", name, err)
	}
	s.read(t.Data)
	if !pack {
		return newMatrix(quant.Q4_1BF16, rows, cols, data)
	}
	s.scratch = data
	p, err := packParallel(s.level, quant.Q4_1BF16, rows, cols, data, s.threads, s.arena)
	if err != nil {
		return matrix{}, fmt.Errorf("tensor %s: %w", name, err)
	}
	rb, _ := quant.Q4_1BF16.RowBytes(cols)
	return matrix{Type: quant.Q4_1BF16, Rows: rows, Cols: cols, rowBytes: rb, kern: kernPacked, packed: p}, nil
}

func (s *q4nxSource) vector(name string, n int) ([]float32, error) { return s.st.vector(name, n) }

func loadQ4NX(dir string, opts LoadOptions) (_ *Model, err error) {
	c, _, err := readHFConfig(dir, "q4nx")
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	path := filepath.Join(dir, "model.q4nx")
	mf, err := mmapfile.Open(path)
	if err != nil {
		return nil, err
	}
	m.files = append(m.files, mf)
	f, err := q4nx.Parse(mf.Data)
	if err != nil {
		return nil, fmt.Errorf("model.q4nx: %w", err)
	}
	st := &stSource{tensors: f.Tensors, file: map[string]string{}, threads: opts.threads()}
	for n := range f.Tensors {
		st.file[n] = "model.q4nx"
	}
	src := &q4nxSource{st: st, threads: opts.threads(), level: opts.simd.Level,
		pack: quant.HasPackedKernel(opts.simd.Level, quant.Q4_1BF16) && !opts.FloatActivations,
		file: mf, progress: opts.Progress, arena: &m.arena}
	layout := "rows"
	if src.pack {
		layout = "packed16"
	}
	var id cacheSource
	var key string
	if opts.CacheDir != "" {
		if id, err = q4nxIdentity(path); err != nil {
			return nil, err
		}
		key = cacheKey(id, layout, !opts.NoFoldKV)
		if cf, hdr, bodies, err := openCache(opts.CacheDir, key, id); err == nil {
			m.files = append(m.files, cf)
			m.cfg.KVHeads, m.cachedKV = hdr.KVHeads, hdr.FileKVHeads
			if err := m.build(&cachedSource{q4nx: src, hdr: hdr, bodies: bodies}, hfNames); err != nil {
				return nil, err
			}
			if err := m.finish(opts); err != nil {
				return nil, err
			}
			// the matrices live in the cache's mapping; the vectors were
			// copied out of model.q4nx
			m.files = m.files[1:]
			return m, mf.Close()
		}
	}
	if err := m.build(src, hfNames); err != nil {
		return nil, err
	}
	if src.progress != nil {
		src.progress(int64(len(mf.Data)), int64(len(mf.Data)))
	}
	if err := m.finish(opts); err != nil {
		return nil, err
	}
	if opts.CacheDir != "" {
		hdr := cacheHeader{Version: cacheVersion, Source: id, Layout: layout, Fold: !opts.NoFoldKV,
			KVHeads: m.cfg.KVHeads, FileKVHeads: m.cfg.FileKVHeads}
		// A cache that cannot be written only makes the next load slower.
		m.cacheErr = m.writeCache(opts.CacheDir, key, hdr)
	}
	// Every weight now lives in the heap (unpacked or copied): release the
	// 2 GB file instead of keeping it resident (on Windows it was read
	// into memory, not mapped).
	if err := m.Close(); err != nil {
		return nil, err
	}
	return m, nil
}
