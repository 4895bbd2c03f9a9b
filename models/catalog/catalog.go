// Package catalog lists the models NPU Chat offers. The list is data, not
// code: catalog.json is embedded in the binary, so adding a model means
// adding an entry there; FastFlowLM's own model_list.json (v0.9.45) is
// embedded beside it, and its models are offered and installed the same
// way, each saying whether the in-process engine can run it. Each entry says where the files come from (a
// Hugging Face repository and revision), which of them FastFlowLM needs,
// the model_list.json entry FastFlowLM reads, the tokenizer facts FastFlowLM
// insists on, and what the port changed (so the in-process engine can undo
// it).
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/npuchat/npuchat/models/flm"
)

//go:embed catalog.json
var catalogJSON []byte

// Catalog is the list of models, in the order they are offered: NPU
// Chat's own (catalog.json), then FastFlowLM's own (its model_list.json,
// embedded), installable the same way.
type Catalog struct {
	Models []*Model `json:"models"`
	// FLM are FastFlowLM's own models, less those Models holds.
	FLM []*Model `json:"-"`
}

// Model is one model NPU Chat can install.
type Model struct {
	// Name is the tag people type: "family:size", e.g. "minicpm5:2b".
	Name        string `json:"name"`
	Family      string `json:"family"`
	Size        string `json:"size"`
	Description string `json:"description"`
	Default     bool   `json:"default,omitempty"`
	// Source is the repository installed for FastFlowLM and read by the
	// in-process engine (model.q4nx).
	Source Source `json:"source"`
	// Original is the unported model (Hugging Face safetensors), an
	// alternative source for the in-process engine. Optional.
	Original *Source `json:"original,omitempty"`
	// FLM is how the model is registered in FastFlowLM's model_list.json.
	FLM FLMEntry `json:"flm"`
	// Tokenizer holds the token facts FastFlowLM needs in
	// tokenizer_config.json, and the engine's stop tokens.
	Tokenizer Tokenizer `json:"tokenizer"`
	// Port says what the NPU port changed relative to the original model.
	Port Port `json:"port"`

	// Origin is OriginNPUChat (catalog.json) or OriginFastFlowLM (its
	// model_list.json).
	Origin string `json:"-"`
	// Arch is the architecture the in-process engine computes a
	// FastFlowLM model as ("" when it cannot: NoCPU says why). NPU
	// Chat's own models all run on the CPU too.
	Arch  string `json:"-"`
	NoCPU string `json:"-"`
}

// Engines are what can run the model: "npu", and "cpu" when the
// in-process engine computes it.
func (m *Model) Engines() []string {
	if m.CPUNote() != "" {
		return []string{"npu"}
	}
	return []string{"npu", "cpu"}
}

// CPUNote says, before any download, why the in-process engine cannot
// run the model ("" when it can).
func (m *Model) CPUNote() string {
	if m.Origin != OriginFastFlowLM || m.Arch != "" {
		return ""
	}
	note := m.NoCPU
	if note == "" {
		note = "NPU Chat's CPU engine does not compute it"
	}
	return "The CPU cannot run it: " + note + "."
}

// HasTokenizerFacts reports whether the catalog knows what FastFlowLM
// needs in the model's tokenizer_config.json (FastFlowLM's own models
// need no edit, and carry none).
func (m *Model) HasTokenizerFacts() bool {
	return m.Tokenizer.EOSToken != "" && len(m.Tokenizer.EOSTokenIDs) > 0
}

// Source is a Hugging Face repository and the files taken from it.
type Source struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	// Files are paths in the repository; an entry may be a path.Match
	// pattern such as "*.safetensors".
	Files []string `json:"files"`
	// XCLBins are the NPU kernels among Files, copied to FastFlowLM's
	// xclbin folder.
	XCLBins []string `json:"xclbins,omitempty"`
	// Format is "flm-q4nx" (default) or "hf-safetensors".
	Format string `json:"format,omitempty"`
}

// FLMEntry places the model in FastFlowLM's model_list.json: under
// models[Family][Tag], with Entry as the value (kept as raw JSON so that
// every field FastFlowLM reads is written exactly as listed).
type FLMEntry struct {
	Family string          `json:"family"`
	Tag    string          `json:"tag"`
	Entry  json.RawMessage `json:"entry"`
}

// Tokenizer holds what FastFlowLM requires of tokenizer_config.json.
type Tokenizer struct {
	EOSToken    string `json:"eos_token"`
	EOSTokenIDs []int  `json:"eos_token_ids"`
	BOSTokenID  int    `json:"bos_token_id"`
	PadTokenID  int    `json:"pad_token_id"`
}

// Port records how the NPU port differs from the original model.
type Port struct {
	// KVHeadsOriginal and KVHeadsReplicated: the port repeats each KV head
	// KVReplication times; the engine may fold identical copies back.
	KVHeadsOriginal   int `json:"kv_heads_original"`
	KVHeadsReplicated int `json:"kv_heads_replicated"`
	KVReplication     int `json:"kv_replication"`
	// InjectedQKNorm: the port added unit q_norm/k_norm weights the
	// original model does not have; the engine must skip them to compute
	// the original model.
	InjectedQKNorm bool `json:"injected_qk_norm"`
	// RopeLayout is the RoPE pairing the port's weights need on the CPU:
	// "normal" (interleaved) because the port ran FastFlowLM's qwen3
	// converter on a llama-architecture GGUF, which keeps llama.cpp's
	// permuted Q/K rows (docs/q4nx.md); "" lets the engine choose.
	RopeLayout string `json:"rope_layout,omitempty"`
}

// flmEntry is the model's FastFlowLM entry as read (validated by Parse).
func (m *Model) flmEntry() flm.ListEntry {
	e, _ := flm.ParseListEntry(m.FLM.Family, m.FLM.Tag, m.FLM.Entry)
	return e
}

// FLMName is the folder name FastFlowLM uses for the model, under both
// its models folder and its xclbin folder ("MiniCPM5-2B-NPU2").
func (m *Model) FLMName() string { return m.flmEntry().Name }

// FLMMinVersion is the entry's flm_min_version.
func (m *Model) FLMMinVersion() string { return m.flmEntry().MinVersion }

// FLMBytes is the model's size in bytes from its FastFlowLM entry (what
// FastFlowLM raises memlock by), or 0 when the entry has none.
func (m *Model) FLMBytes() int64 { return m.flmEntry().Size }

// FLMContext is the model's default context length from its FastFlowLM
// entry, the context FastFlowLM serves it with (0 when absent).
func (m *Model) FLMContext() int { return m.flmEntry().Context }

// FLMTag is the tag FastFlowLM serves the model under ("minicpm5:2b").
func (m *Model) FLMTag() string { return m.FLM.Family + ":" + m.FLM.Tag }

// Load returns the embedded catalog: NPU Chat's models and FastFlowLM's.
// The embedded lists are read once; each call returns its own copy, so
// that a caller changing a model changes no one else's.
func Load() (*Catalog, error) {
	c, err := loadEmbedded()
	if err != nil {
		return nil, err
	}
	return c.clone(), nil
}

// loadEmbedded reads the embedded lists, once (it takes milliseconds,
// and the app describes every model each time the models are listed).
var loadEmbedded = sync.OnceValues(func() (*Catalog, error) {
	c, err := Parse(catalogJSON)
	if err != nil {
		return nil, err
	}
	own, err := ParseFLMList(flmListJSON)
	if err != nil {
		return nil, err
	}
	for _, m := range own {
		if c.find(m.Name) == nil {
			c.FLM = append(c.FLM, m)
		}
	}
	return c, nil
})

// clone copies the catalog and its models (their slices and raw JSON
// are shared: nothing changes them).
func (c *Catalog) clone() *Catalog {
	out := &Catalog{}
	for _, m := range c.Models {
		cp := *m
		out.Models = append(out.Models, &cp)
	}
	for _, m := range c.FLM {
		cp := *m
		out.FLM = append(out.FLM, &cp)
	}
	return out
}

// All lists every model, NPU Chat's first.
func (c *Catalog) All() []*Model { return append(slices.Clone(c.Models), c.FLM...) }

// find is the model of that exact name, tag or folder name, or nil.
func (c *Catalog) find(name string) *Model {
	for _, m := range c.All() {
		if strings.EqualFold(m.Name, name) || strings.EqualFold(m.FLMName(), name) || strings.EqualFold(m.FLMTag(), name) {
			return m
		}
	}
	return nil
}

// Parse reads a catalog from JSON and checks every entry.
func Parse(b []byte) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("catalog: model %d (%q): %w", i, m.Name, err)
		}
		if seen[strings.ToLower(m.Name)] {
			return nil, fmt.Errorf("catalog: model %q listed twice", m.Name)
		}
		seen[strings.ToLower(m.Name)] = true
	}
	return &c, nil
}

func (m *Model) check() error {
	if m.Name != m.Family+":"+m.Size {
		return fmt.Errorf("name must be family:size (%s:%s)", m.Family, m.Size)
	}
	if m.Source.Repo == "" || m.Source.Revision == "" || len(m.Source.Files) == 0 {
		return fmt.Errorf("source needs repo, revision and files")
	}
	switch m.Port.RopeLayout {
	case "", "neox", "normal":
	default:
		return fmt.Errorf("port.rope_layout %q is not neox or normal", m.Port.RopeLayout)
	}
	e, err := flm.ParseListEntry(m.FLM.Family, m.FLM.Tag, m.FLM.Entry)
	if err != nil {
		return fmt.Errorf("flm entry: %w", err)
	}
	// FastFlowLM reads file_url unconditionally and fails without it.
	if e.Name == "" || e.FileURL == "" || e.MinVersion == "" || len(e.Files) == 0 || e.ArchFamily == "" {
		return fmt.Errorf("flm entry needs name, file_url, flm_min_version, files and details.family")
	}
	if m.FLM.Family == "" || m.FLM.Tag == "" {
		return fmt.Errorf("flm needs family and tag")
	}
	// Half the facts would write a broken tokenizer_config.json.
	if t := m.Tokenizer; (t.EOSToken != "") != (len(t.EOSTokenIDs) > 0) {
		return fmt.Errorf("tokenizer needs both eos_token and eos_token_ids, or neither")
	}
	return nil
}

// Lookup finds a model by name, case-insensitively: "minicpm5:2b", the
// family alone ("minicpm5", its first size), or FastFlowLM's folder name
// ("MiniCPM5-2B-NPU2"), among NPU Chat's models and then FastFlowLM's
// ("qwen3:0.6b"). An empty name means the default model.
func (c *Catalog) Lookup(name string) (*Model, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		for _, m := range c.Models {
			if m.Default {
				return m, nil
			}
		}
		if len(c.Models) > 0 {
			return c.Models[0], nil
		}
	}
	if m := c.find(name); m != nil {
		return m, nil
	}
	for _, m := range c.All() {
		if strings.EqualFold(m.Family, name) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown model %q; known models: %s", name, strings.Join(c.Names(), ", "))
}

// Names lists the model names in catalog order.
func (c *Catalog) Names() []string {
	var n []string
	for _, m := range c.All() {
		n = append(n, m.Name)
	}
	return n
}
