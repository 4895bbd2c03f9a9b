package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/npuchat/npuchat/config"
	"github.com/npuchat/npuchat/models/flm"
	"github.com/npuchat/npuchat/safefile"
)

// Manifest records one installed model: where its files are, the hashes
// the hub recorded for them, the hashes after NPU Chat's edits, and where
// it was registered. It lives in <data>/installed/<model>[.original].json.
type Manifest struct {
	Model    string `json:"model"`
	Source   string `json:"source"` // "npu" (the FastFlowLM port) or "original"
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	// Commit is the commit Revision pointed at, which was installed.
	Commit string `json:"commit,omitempty"`
	// Target is "flm" (FastFlowLM's models folder) or "npuchat" (NPU
	// Chat's own, for the in-process engine only).
	Target     string         `json:"target"`
	Dir        string         `json:"dir"`
	Files      []ManifestFile `json:"files"`
	XclbinDirs []string       `json:"xclbin_dirs,omitempty"`
	// XclbinFound are the XclbinDirs that existed before NPU Chat first
	// copied kernels into them (FastFlowLM's own folder of the model,
	// filled by hand per the model card): uninstall leaves them.
	XclbinFound []string `json:"xclbin_found,omitempty"`
	Lists       []string `json:"lists,omitempty"`
	// ListsBefore holds, per list, the entry it had under the model's
	// family and tag before NPU Chat first registered the model there
	// (the user's own, from the model card or `flm pull`); uninstall
	// puts it back instead of deleting the entry.
	ListsBefore map[string]json.RawMessage `json:"lists_before,omitempty"`
	FLMVersion  string                     `json:"flm_version,omitempty"`
	InstalledAt time.Time                  `json:"installed_at"`
}

// ManifestFile is one installed file.
type ManifestFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// BlobID and SHA256 are what the hub recorded.
	BlobID string `json:"blob_id,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Edited is set when NPU Chat changed the file after download
	// (tokenizer_config.json, config.json); LocalSHA256 and LocalSize are
	// then those of the edited file.
	Edited      bool   `json:"edited,omitempty"`
	LocalSHA256 string `json:"local_sha256,omitempty"`
	LocalSize   int64  `json:"local_size,omitempty"`
	// ModTime is the installed file's modification time (Unix ns), to
	// notice changes without hashing.
	ModTime int64 `json:"mod_time"`
	// Adopted is set when the file was already in place, with the hub's
	// hashes, when NPU Chat first installed into the folder (the model
	// card's git clone, or `flm pull`): NPU Chat did not create it, so
	// uninstall keeps it (an edited one is put back from its .bak).
	Adopted bool `json:"adopted,omitempty"`
}

// TotalSize is the sum of the installed files' sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, f := range m.Files {
		if f.Edited {
			n += f.LocalSize
		} else {
			n += f.Size
		}
	}
	return n
}

func manifestPath(cfg *config.Config, model, source string) string {
	name := strings.NewReplacer(":", "-", "/", "-", `\`, "-").Replace(strings.ToLower(model))
	if source == SourceOriginal {
		name += ".original"
	}
	return filepath.Join(cfg.DataDir, "installed", name+".json")
}

// loadManifest reads a model's manifest; a missing one gives nil, nil.
func loadManifest(cfg *config.Config, model, source string) (*Manifest, error) {
	path := manifestPath(cfg, model, source)
	b, err := safefile.ReadFile(path, flm.MaxJSONBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &damagedError{path: path, model: model, err: err}
	}
	return &m, nil
}

// damagedError is an install record that does not parse. Install makes
// it again; everything else says to run the install.
type damagedError struct {
	path, model string
	err         error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("install record %s is damaged (%v); run npuchat install %s to make it again from the files in place", e.path, e.err, e.model)
}

func saveManifest(cfg *config.Config, m *Manifest) (bool, error) {
	path := manifestPath(cfg, m.Model, m.Source)
	old, _ := loadManifest(cfg, m.Model, m.Source)
	if old != nil {
		// Keep the install time when nothing else changed, so that a
		// second install rewrites nothing.
		probe := *m
		probe.InstalledAt = old.InstalledAt
		a, _ := json.Marshal(probe)
		b, _ := json.Marshal(old)
		if string(a) == string(b) {
			return false, nil
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return false, err
	}
	return true, config.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

func (m *Manifest) setListBefore(list string, v json.RawMessage) {
	if m.ListsBefore == nil {
		m.ListsBefore = map[string]json.RawMessage{}
	}
	m.ListsBefore[list] = v
}
