package service

import "time"

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
}

// Models lists the models the service knows (the catalog and local
// files), as given by Options.Models.
func (m *Manager) Models() []ModelDesc {
	if m.opts.Models == nil {
		return nil
	}
	return m.opts.Models()
}
