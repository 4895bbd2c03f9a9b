package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/npuchat/npuchat/models/flm"
)

// flmListJSON is FastFlowLM's own model_list.json (v0.9.45), the list of
// the models FastFlowLM offers, embedded as FastFlowLM ships it.
//
//go:embed flm_model_list.json
var flmListJSON []byte

// Origins of a catalog model.
const (
	OriginNPUChat    = ""           // NPU Chat's own catalog (catalog.json)
	OriginFastFlowLM = "fastflowlm" // FastFlowLM's own model_list.json
)

// flmCPU maps FastFlowLM's details.family of a text model to the
// engine's architecture, for the families the in-process engine is shown
// (engine tests "qwen3 flm") to compute from FastFlowLM's q4nx: the qwen3
// converter's layout, rows in Hugging Face order. Every other family
// runs on the NPU only; flmNoCPU says why.
var flmCPU = map[string]string{
	"qwen3": "qwen3", "qwen3-tk": "qwen3", "qwen3-it": "qwen3", "deepseek-r1-0528": "qwen3",
}

// flmNoCPU says why the in-process engine cannot run a family, for the
// families where there is more to say than "it does not compute it".
var flmNoCPU = map[string]string{
	"llama3": "Llama 3 models use Llama 3 RoPE scaling, which NPU Chat's CPU engine does not compute, " +
		"and it is not shown to read FastFlowLM's llama q4nx layout",
	"deepseek-r1": "this is a Llama 3.1 model: it uses Llama 3 RoPE scaling, which NPU Chat's CPU engine does not compute, " +
		"and it is not shown to read FastFlowLM's llama q4nx layout",
	"qwen2": "NPU Chat's CPU engine computes Qwen2 from GGUF files, but is not shown to read FastFlowLM's qwen2 q4nx layout (its q, k and v biases)",
}

// FLMFamilyCPU says whether the in-process engine runs models of one of
// FastFlowLM's details.family values from their q4nx (arch, the engine's
// architecture), or why not (why, "" when it does).
func FLMFamilyCPU(family string) (arch, why string) {
	if a := flmCPU[family]; a != "" {
		return a, ""
	}
	if w := flmNoCPU[family]; w != "" {
		return "", w
	}
	return "", fmt.Sprintf("NPU Chat's CPU engine does not compute the %s architecture", family)
}

// ParseFLMList reads a FastFlowLM model_list.json (through the one
// reader of the list, flm.ParseList) into catalog models (Origin
// OriginFastFlowLM), sorted by name. An entry without a name or files,
// or whose address is not a Hugging Face repository, is an error naming
// it.
func ParseFLMList(b []byte) ([]*Model, error) {
	entries, err := flm.ParseList(b)
	if err != nil {
		return nil, err
	}
	var out []*Model
	for _, e := range entries {
		m, err := fromFLM(e)
		if err != nil {
			return nil, fmt.Errorf("FastFlowLM's model list: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}

// FromFLMEntry makes a catalog model of one entry of a FastFlowLM
// model_list.json, models[family][tag]: its files come from the entry's
// repository and revision (url), it is registered under the same tag
// with the same entry, and it carries no tokenizer facts (FastFlowLM's
// own files need no edit) and no port.
func FromFLMEntry(family, tag string, raw json.RawMessage) (*Model, error) {
	e, err := flm.ParseListEntry(family, tag, raw)
	if err != nil {
		return nil, err
	}
	return fromFLM(e)
}

// fromFLM is FromFLMEntry of an entry already read.
func fromFLM(e flm.ListEntry) (*Model, error) {
	name := e.Served()
	if e.Name == "" || len(e.Files) == 0 {
		return nil, fmt.Errorf("%s has no name or files", name)
	}
	repo, rev, err := hfRepo(e.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m := &Model{
		Name: name, Family: e.Family, Size: e.Tag, Origin: OriginFastFlowLM,
		Description: e.Name + " (FastFlowLM, " + repo + ")",
		Source:      Source{Repo: repo, Revision: rev, Files: slices.Clone(e.Files)},
		FLM:         FLMEntry{Family: e.Family, Tag: e.Tag, Entry: slices.Clone(e.Raw)},
	}
	switch {
	case e.VLM || e.ASR:
		// The language model alone is not the model: its vision or audio
		// weights need FastFlowLM.
		m.NoCPU = "it needs its vision or audio weights, which only FastFlowLM computes"
	default:
		m.Arch, m.NoCPU = FLMFamilyCPU(e.ArchFamily)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// hfRepo reads owner/name and the revision ("main" when absent) from a
// Hugging Face address: https://huggingface.co/owner/name[/resolve/rev].
func hfRepo(raw string) (repo, rev string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host != "huggingface.co" {
		return "", "", fmt.Errorf("%q is not a Hugging Face address", raw)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 {
		return "", "", fmt.Errorf("%q names no repository", raw)
	}
	rev = "main"
	if len(parts) >= 4 && parts[2] == "resolve" {
		rev = parts[3]
	}
	return parts[0] + "/" + parts[1], rev, nil
}
