package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// flmListJSON is FastFlowLM's own model_list.json (v0.9.45), the list of
// the models FastFlowLM offers, embedded as FastFlowLM ships it.
//
//go:embed flm_model_list.json
var flmListJSON []byte

// Offer is one model of FastFlowLM's own list, as the catalog offers it
// beside NPU Chat's models.
type Offer struct {
	// Name is FastFlowLM's tag, family:tag ("qwen3:0.6b").
	Name string `json:"name"`
	// Folder is the model's folder name in FastFlowLM's models folder.
	Folder   string `json:"folder"`
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	Size     int64  `json:"size"`
	// Family is the list's details.family ("qwen3", "gemma3", "lfm2").
	Family        string `json:"family"`
	ParameterSize string `json:"parameter_size,omitempty"`
	// Arch is the architecture the in-process engine would compute it
	// as ("" when it has no such architecture: vision, audio, embedding
	// and families it does not know).
	Arch string `json:"arch,omitempty"`
	// Files are the files FastFlowLM downloads for it.
	Files []string `json:"files"`
}

// flmArchs maps FastFlowLM's details.family of a text model whose
// converter writes the language-model q4nx layout (engine/q4nx,
// docs/q4nx.md) to the engine's architecture. Families not here
// (vision, audio, embedding, and architectures the engine does not
// compute: gemma, lfm2, phi4, gpt-oss, qwen3.5, nanbeige) run on the
// NPU only.
var flmArchs = map[string]string{
	"qwen3": "qwen3", "qwen3-tk": "qwen3", "qwen3-it": "qwen3", "deepseek-r1-0528": "qwen3",
	"llama3": "llama", "deepseek-r1": "llama",
	"qwen2": "qwen2",
}

// FLMOffers returns FastFlowLM's own models from its embedded
// model_list.json, sorted by name.
func FLMOffers() ([]Offer, error) { return ParseFLMList(flmListJSON) }

// ParseFLMList reads a FastFlowLM model_list.json into offers. An entry
// without a name, or whose address is not a Hugging Face repository, is
// an error naming it.
func ParseFLMList(b []byte) ([]Offer, error) {
	var list struct {
		Models map[string]map[string]struct {
			Name    string   `json:"name"`
			URL     string   `json:"url"`
			FileURL string   `json:"file_url"`
			Size    int64    `json:"size"`
			Files   []string `json:"files"`
			Details struct {
				Family string `json:"family"`
				Params string `json:"parameter_size"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("FastFlowLM's model list: %w", err)
	}
	var out []Offer
	for fam, tags := range list.Models {
		for tag, e := range tags {
			name := fam + ":" + tag
			if e.Name == "" || len(e.Files) == 0 {
				return nil, fmt.Errorf("FastFlowLM's model list: %s has no name or files", name)
			}
			repo, rev, err := hfRepo(e.URL)
			if err != nil {
				return nil, fmt.Errorf("FastFlowLM's model list: %s: %w", name, err)
			}
			out = append(out, Offer{Name: name, Folder: e.Name, Repo: repo, Revision: rev, Size: e.Size,
				Family: e.Details.Family, ParameterSize: e.Details.Params, Arch: flmArchs[e.Details.Family], Files: e.Files})
		}
	}
	slices.SortFunc(out, func(a, b Offer) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
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
