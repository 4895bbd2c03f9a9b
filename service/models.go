package service

import (
	"slices"
	"time"

	"github.com/npuchat/npuchat/service/backend"
)

// ModelDesc describes a model the service can serve, for /v1/models,
// /api/tags and the UI.
type ModelDesc struct {
	Name          string    `json:"name"` // served name, e.g. "minicpm5:2b"
	Description   string    `json:"description,omitempty"`
	Family        string    `json:"family,omitempty"`
	ParameterSize string    `json:"parameter_size,omitempty"`
	Quantization  string    `json:"quantization_level,omitempty"`
	Format        string    `json:"format,omitempty"`
	Size          int64     `json:"size,omitempty"` // bytes on disk
	ModifiedAt    time.Time `json:"modified_at"`
	Digest        string    `json:"digest,omitempty"`
	Installed     bool      `json:"installed"`
	ContextLength int       `json:"context_length,omitempty"`
	Path          string    `json:"path,omitempty"` // where its files are, if installed
	// Shape is the model's size read from its files (cpu.Describe), for
	// /api/show; zero when not known before it loads.
	Shape backend.Shape `json:"-"`
}

// Models lists the models the service knows (the catalog and local
// files), as given by Options.Models.
func (m *Manager) Models() []ModelDesc {
	if m.opts.Models == nil {
		return nil
	}
	return m.opts.Models()
}

// Capabilities is what model can do as it is served now, as Ollama's
// /api/show lists them: what Options.Capabilities says it will do (from
// its files, before it is loaded) together with what the loaded
// backend, and the one beside it, say they do, so that the answer is
// the same before and after the model loads. Plain completion when
// nothing is known.
func (m *Manager) Capabilities(model string) []string {
	var have []string
	if m.opts.Capabilities != nil {
		have = append(have, m.opts.Capabilities(model)...)
	}
	m.mu.Lock()
	if m.be != nil && m.beModel == model && m.info != nil {
		have = append(have, m.info.Capabilities...)
	}
	if m.side != nil && m.sideModel == model {
		have = append(have, m.sideCaps...)
	}
	m.mu.Unlock()
	out := []string{backend.CapCompletion}
	for _, c := range []string{backend.CapTools, backend.CapJSON, backend.CapLogprobs, backend.CapEmbedding} {
		if slices.Contains(have, c) {
			out = append(out, c)
		}
	}
	return out
}
