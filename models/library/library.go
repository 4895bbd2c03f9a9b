// Package library is the one owner of NPU Chat's models: which exist,
// where their files are, what can run each and which is current.
// Library resolves every source once (NPU Chat's catalog and what is
// installed of it, FastFlowLM's own model_list.json, the files the user
// added, a --model path, what a remote server serves) into Entries,
// keeps the current model in the settings (config.Store), and publishes
// Changed on the process's event bus when either changes, so that the
// tray and the page follow without polling.
//
// The models the user added from outside NPU Chat's folders (a GGUF
// file, a Hugging Face folder, a FastFlowLM model folder) are kept in
// the settings (config.Settings.AddedModels, written by the store; the
// library.json of earlier versions is moved there once); and the
// library is the only way a path typed or browsed
// on the page or in the tray becomes a model: Roots confines every path
// to the user's home and the models folders, after following links, so
// that no "..", symlink or absolute path leads outside them.
//
// Forgetting a model removes it from the settings only: files the user
// added are never deleted.
package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/npuchat/npuchat/config"
)

// Formats of a model on disk, as Detect names them.
const (
	FormatGGUF = "gguf"        // one .gguf file
	FormatHF   = "safetensors" // a Hugging Face folder: config.json, *.safetensors, tokenizer
	FormatFLM  = "q4nx"        // a FastFlowLM folder: config.json, model.q4nx, tokenizer
)

// readLegacy reads the library.json where earlier versions kept the
// added models; a missing file is none. A damaged file is an error that
// names it.
func readLegacy(path string) ([]config.AddedModel, error) {
	b, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model library %s: %w", path, err)
	}
	var j struct {
		Models []config.AddedModel `json:"models"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("model library %s is damaged (%v): fix or remove it", path, err)
	}
	return j.Models, nil
}
