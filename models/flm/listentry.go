package flm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ListEntry is one model of a FastFlowLM model_list.json,
// models[Family][Tag], with the fields NPU Chat reads. This is the one
// reader of the list's entries: the catalog (FastFlowLM's embedded list),
// the model library (FastFlowLM's installed models) and the installer
// all parse through ParseList and ParseListEntry.
type ListEntry struct {
	// Family and Tag are the entry's keys; FastFlowLM serves the model
	// as "family:tag" (Served).
	Family, Tag string
	// Name is the model's folder under FastFlowLM's models folder and
	// its xclbin folder ("MiniCPM5-2B-NPU2").
	Name string
	// URL is the Hugging Face address its files come from, and Files
	// those files.
	URL   string
	Files []string
	// FileURL is file_url, which FastFlowLM reads unconditionally.
	FileURL string
	// VLM and ASR mark models with vision or audio weights.
	VLM, ASR bool
	// Size is the model's bytes (what FastFlowLM raises memlock by); 0
	// when the entry gives none.
	Size int64
	// Context is default_context_length, the context FastFlowLM serves
	// the model with (0: the entry gives none).
	Context int
	// MinVersion is flm_min_version ("" when absent).
	MinVersion string
	// ArchFamily, ParameterSize and Quantization are the entry's
	// details (details.family is the architecture, e.g. "qwen3").
	ArchFamily, ParameterSize, Quantization string
	// Raw is the entry's JSON as the list holds it.
	Raw json.RawMessage
}

// Served is the name FastFlowLM serves the model under: family:tag.
func (e ListEntry) Served() string { return e.Family + ":" + e.Tag }

// ParseListEntry reads the entry models[family][tag] of a model list.
// It checks the JSON only; what a reader needs of it (a name, files) is
// the reader's to check.
func ParseListEntry(family, tag string, raw json.RawMessage) (ListEntry, error) {
	var j struct {
		Name       string   `json:"name"`
		URL        string   `json:"url"`
		FileURL    string   `json:"file_url"`
		Files      []string `json:"files"`
		VLM        bool     `json:"vlm"`
		ASR        bool     `json:"asr"`
		Size       int64    `json:"size"`
		Context    int      `json:"default_context_length"`
		MinVersion string   `json:"flm_min_version"`
		Details    struct {
			Family string `json:"family"`
			Params string `json:"parameter_size"`
			Quant  string `json:"quantization_level"`
		} `json:"details"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return ListEntry{}, fmt.Errorf("%s:%s: %w", family, tag, err)
	}
	return ListEntry{Family: family, Tag: tag, Name: j.Name, URL: j.URL, FileURL: j.FileURL, Files: j.Files, VLM: j.VLM, ASR: j.ASR,
		Size: j.Size, Context: j.Context, MinVersion: j.MinVersion, ArchFamily: j.Details.Family,
		ParameterSize: j.Details.Params, Quantization: j.Details.Quant, Raw: slices.Clone(raw)}, nil
}

// ParseList reads a FastFlowLM model_list.json: every entry, sorted by
// Served. A list or entry that is not the JSON FastFlowLM writes is an
// error naming it.
func ParseList(b []byte) ([]ListEntry, error) {
	var list struct {
		Models map[string]map[string]json.RawMessage `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("FastFlowLM's model list: %w", err)
	}
	var out []ListEntry
	for fam, tags := range list.Models {
		for tag, raw := range tags {
			e, err := ParseListEntry(fam, tag, raw)
			if err != nil {
				return nil, fmt.Errorf("FastFlowLM's model list: %w", err)
			}
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(x, y ListEntry) int { return strings.Compare(x.Served(), y.Served()) })
	return out, nil
}
